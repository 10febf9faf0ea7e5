-- The UTC quarter hours each visitor has events in: one row per site, quarter hour and visitor
-- once merged. Every bucket of `overview-bucketed` from fifteen minutes to a month, in a zone
-- whose offsets are whole quarter hours (every zone's since 1972), is a run of whole quarter
-- hours, so its distinct visitors are the distinct keys of that run's rows: a read of one row
-- per visitor and quarter hour instead of every session of the range with the buckets of its
-- events (queries/analytics/buckets.ts).
--
-- A distinct count reads the rows as they are: a row stored twice (a replayed insert, the
-- backfill below running again or overlapping the view) or not yet merged counts once, and a
-- late event only adds its quarter hour. Events before 1970 are left out; reads never ask for
-- them.
CREATE TABLE IF NOT EXISTS visitor_quarters
(
    site_id  UInt32,
    -- Quarter hours since 1970 (UTC): the event's epoch milliseconds divided by 900,000.
    quarter  UInt32,
    -- The visitor id's 64 bits as a number, as `session_facts.user_key` (0005).
    user_key UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY intDiv(quarter, 2976)
ORDER BY (site_id, quarter, user_key);

CREATE MATERIALIZED VIEW IF NOT EXISTS visitor_quarters_mv TO visitor_quarters
AS SELECT DISTINCT
    site_id,
    toUInt32(intDiv(toUnixTimestamp64Milli(timestamp), 900000)) AS quarter,
    reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key
FROM events
WHERE timestamp >= toDateTime64(0, 3, 'UTC');

-- Rows stored before this migration (running it twice only stores rows that merge away).
INSERT INTO visitor_quarters
SELECT DISTINCT
    site_id,
    toUInt32(intDiv(toUnixTimestamp64Milli(timestamp), 900000)),
    reinterpretAsUInt64(reverse(unhex(user_id)))
FROM events
WHERE timestamp >= toDateTime64(0, 3, 'UTC')
SETTINGS max_bytes_before_external_group_by = 1000000000;
