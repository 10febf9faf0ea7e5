-- The rows of `session_pages` (migration 0016, with 0021-0023), sorted within a build by the
-- country of the session's first event: a filter on the country reads the granules of its
-- countries only, where it read every granule of the range's days before (the filtered pathnames'
-- statement 404 against 317 ms at 10 M events, docs/benchmarks.md). A build's rows never change,
-- so the order costs nothing later. Builds of this table carry layout 3 in
-- `session_pages_builds` (queries/analytics/pages.ts); those of `session_pages` (layout 2) are
-- only never read again, and the old table is left as it is for a process of the earlier version
-- that may still read it while a deployment rolls over.
-- The columns are those of `session_pages` as 0016 and 0021-0023 left them, taken from it.
CREATE TABLE IF NOT EXISTS session_pages_by_country AS session_pages
ENGINE = MergeTree
ORDER BY (site_id, partition, build_id, first_event.country, session_id);
