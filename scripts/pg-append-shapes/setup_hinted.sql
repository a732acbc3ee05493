-- PG_COST_SETUP for the *_gated.sql shapes: the thread row's mark "hinted inserts may
-- follow" (docs/postgres.md Costs), clear in every row
ALTER TABLE @S.threads ADD COLUMN hinted boolean NOT NULL DEFAULT false;
