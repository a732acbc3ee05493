-- sweep.sql: removes up to $1 threads whose deadline has passed; how many back.
SELECT @S.sweep($1::int4)
