-- how many names are kept (numbers are dense from 1): a metadata shape is
-- added only below a bound (layout 8: unbounded kinds of metadata stay text)
SELECT coalesce(max(num), 0) FROM convo_names;
