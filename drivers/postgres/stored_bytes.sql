-- stored_bytes.sql: the bytes of the tables of schema $1 (bare name), with
-- their indexes and TOAST.
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1::text AND c.relkind = 'r'
