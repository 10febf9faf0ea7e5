-- One row per session once merged: the time of its first and last event and the pathnames of
-- its pageviews (64-bit hashes). The goal list counts the sessions lying wholly inside a range
-- here, without a distinct count over every event; the few crossing a range boundary are
-- counted from `events`. Every column aggregates with min, max or a set union, so a row stored
-- twice changes nothing.
--
-- Partitioned by the day the session began (the UUID v7 time of its id): a session's rows all
-- land in one partition, new rows land in today's, and a day's partition is merged into a
-- single part once all its parts are an hour old. A merge-on-read (FINAL) then only merges
-- within the partitions that still have several parts; the others are read as they are.
CREATE TABLE IF NOT EXISTS sessions
(
    site_id       UInt32,
    session_id    UUID,
    session_start SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    session_end   SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    page_hashes   SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    INDEX session_start_idx session_start TYPE minmax GRANULARITY 1,
    INDEX session_end_idx session_end TYPE minmax GRANULARITY 1
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(UUIDv7ToDateTime(session_id))
ORDER BY (site_id, UUIDv7ToDateTime(session_id), session_id)
SETTINGS min_age_to_force_merge_seconds = 3600, min_age_to_force_merge_on_partition_only = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS sessions_mv TO sessions
AS SELECT
    site_id,
    session_id,
    min(timestamp) AS session_start,
    max(timestamp) AS session_end,
    groupUniqArrayIf(cityHash64(pathname), type = 'pageview') AS page_hashes
FROM events
GROUP BY site_id, session_id;

-- Every pageview pathname of a site, once: path goals are matched here (a few rows) and the
-- hashes of the matching paths looked up in `sessions.page_hashes`.
CREATE TABLE IF NOT EXISTS site_pages
(
    site_id  UInt32,
    pathname String
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, pathname);

CREATE MATERIALIZED VIEW IF NOT EXISTS site_pages_mv TO site_pages
AS SELECT DISTINCT site_id, toString(pathname) AS pathname
FROM events
WHERE type = 'pageview';

-- Rows stored before this migration (running it twice only stores rows that merge away). A
-- large history's GROUP BY spills to disk instead of holding every session in memory.
INSERT INTO sessions
SELECT site_id, session_id, min(timestamp), max(timestamp),
    groupUniqArrayIf(cityHash64(pathname), type = 'pageview')
FROM events
GROUP BY site_id, session_id
SETTINGS max_bytes_before_external_group_by = 1000000000;

INSERT INTO site_pages
SELECT DISTINCT site_id, toString(pathname)
FROM events
WHERE type = 'pageview';
