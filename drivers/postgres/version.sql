-- version.sql: the schema's version; 0 before its first migration.
SELECT coalesce(max(version), 0) FROM @S.schema_version
