-- the bytes of the pages in use: free pages (left by deletes, reused by later
-- writes) are not counted
SELECT (p.page_count - f.freelist_count) * s.page_size
  FROM pragma_page_count AS p, pragma_freelist_count AS f, pragma_page_size AS s;
