-- checkpoint_prune.sql: keeps a thread's last $2 checkpoints per namespace.
SELECT @S.checkpoint_prune($1::text, $2::int8, $3::interval)
