-- index_keys.sql: the store's declared index keys, sorted; $1 the opener's
-- (text[], sorted; NULL: none declared), recorded when none are yet, else
-- checked against the recorded ones (CV400 when they differ).
SELECT k FROM @S.index_keys($1::text[]) AS k
