-- PG_COST_SETUP for h_tail_arrays.sql: the row's tail as three arrays
ALTER TABLE @S.threads ADD COLUMN buf_body bytea[], ADD COLUMN buf_role text[],
    ADD COLUMN buf_at timestamptz[];
