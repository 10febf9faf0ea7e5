-- The UTC hours of each UTC day each visitor has events in: one row per site, day and visitor
-- once merged, the hours as bits. A bucket of `overview-bucketed` made of whole UTC hours within
-- one UTC day (an hour in a zone whose offsets are whole hours, a day in UTC) then counts its
-- visitors as rows: those of its day whose bits meet its hours (queries/analytics/quarters.ts),
-- without a distinct count over the visitors' quarter hours (`visitor_quarters`, 0011).
--
-- Partitioned by day and merged like the session rollups (0005): a day's parts are merged into
-- one an hour after its last insert, and a part alone in its partition has one row per visitor
-- (the engine merges an inserted block's rows as it writes them); other partitions are read
-- with FINAL. A row stored twice (a replayed insert, the backfill below overlapping the view)
-- changes nothing: its bits are OR-ed. Events before 1970 are left out; reads never ask for
-- them.
CREATE TABLE IF NOT EXISTS visitor_hours
(
    site_id  UInt32,
    -- Days since 1970 (UTC).
    day      UInt32,
    -- The visitor id's 64 bits as a number, as `session_facts.user_key` (0005).
    user_key UInt64,
    -- Bit h: an event in the day's hour h (UTC).
    hours    SimpleAggregateFunction(groupBitOr, UInt32)
)
ENGINE = AggregatingMergeTree
PARTITION BY day
ORDER BY (site_id, day, user_key)
SETTINGS min_age_to_force_merge_seconds = 3600, min_age_to_force_merge_on_partition_only = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS visitor_hours_mv TO visitor_hours
AS SELECT
    site_id,
    toUInt32(intDiv(toUnixTimestamp64Milli(timestamp), 86400000)) AS day,
    reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key,
    groupBitOr(bitShiftLeft(toUInt32(1), toUInt8(intDiv(toUnixTimestamp64Milli(timestamp) % 86400000, 3600000)))) AS hours
FROM events
WHERE timestamp >= toDateTime64(0, 3, 'UTC')
GROUP BY site_id, day, user_key;

-- Rows stored before this migration, from the visitors' quarter hours (0011), which hold the
-- same events (running it twice only stores rows that merge away).
INSERT INTO visitor_hours
SELECT
    site_id,
    intDiv(quarter, 96) AS day,
    user_key,
    groupBitOr(bitShiftLeft(toUInt32(1), toUInt8(intDiv(quarter % 96, 4)))) AS hours
FROM visitor_quarters
GROUP BY site_id, day, user_key
SETTINGS max_bytes_before_external_group_by = 1000000000;
