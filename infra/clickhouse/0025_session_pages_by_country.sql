-- The rows of `session_pages` (migration 0016, with 0021-0023), sorted within a build by the
-- country of the session's first event: a filter on the country reads the granules of its
-- countries only, where it read every granule of the range's days before (the filtered pathnames'
-- statement 404 against 317 ms at 10 M events, docs/benchmarks.md). A build's rows never change,
-- so the order costs nothing later. Builds of this table carry layout 3 in
-- `session_pages_builds` (queries/analytics/pages.ts); those of `session_pages` (layout 2) are
-- only never read again, and the old table is left as it is for a process of the earlier version
-- that may still read it while a deployment rolls over.
CREATE TABLE IF NOT EXISTS session_pages_by_country
(
    site_id         UInt32,
    partition       UInt32,
    build_id        UUID,
    session_id      UUID,
    session_start   DateTime64(3, 'UTC'),
    session_end     DateTime64(3, 'UTC'),
    first_event     Tuple(
        country LowCardinality(String),
        region LowCardinality(String),
        city LowCardinality(String),
        browser LowCardinality(String),
        browser_version LowCardinality(String),
        operating_system LowCardinality(String),
        operating_system_version LowCardinality(String),
        device_type LowCardinality(String),
        language LowCardinality(String)),
    paths           Array(UInt64),
    constants_low   UInt64,
    constants_high  UInt64,
    pageviews       UInt32,
    tied            UInt8,
    unsure          UInt8,
    page_hashes     Array(UInt64),
    page_counts     Array(UInt64),
    title_paths     Array(UInt64),
    titles          Array(LowCardinality(String)),
    title_hash_counts Array(UInt64),
    entry_hash      UInt64,
    entry_gap       Int64,
    exit_hash       UInt64,
    exit_gap        Int64
)
ENGINE = MergeTree
ORDER BY (site_id, partition, build_id, first_event.country, session_id);
