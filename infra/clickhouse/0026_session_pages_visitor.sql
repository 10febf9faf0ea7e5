-- The visitor of each session of a build, as `session_facts.user_key` (0005): with it, the
-- filtered session totals (the overview, its comparison, the time series' buckets) read a settled
-- day's sessions from its build, sorted by country (0025), instead of from `session_facts`, sorted
-- by time, whose every granule a country filter must read (queries/analytics/rollup.ts). Builds of
-- rows with the column carry layout 4 in `session_pages_builds`, their `pageviews` counted as the
-- `session_facts` row counts them; those of layout 3 (the column's default, 0, in every row) are
-- never read again, their days built anew.
ALTER TABLE session_pages_by_country ADD COLUMN IF NOT EXISTS user_key UInt64 AFTER session_end;
