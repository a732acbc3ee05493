-- migrate-record.sql: records that migration $1 ran (in its transaction).
INSERT INTO @S.schema_version (version) VALUES ($1::int4)
