-- One row per session once merged: its events in order, for funnels, journeys and page values,
-- which then read a few numbers per session instead of grouping the range's events by session.
--
-- Each event is one 128-bit key that sorts in time order:
--   bits 127..80  the event's time in milliseconds since 1970 (UTC)
--   bits  79..32  the pathname (pageviews) or event name (custom events): the top 48 bits of
--                 its cityHash64, named back through `site_pages` for pageviews; 0 for the
--                 other types
--   bits  31..0   the low 32 bits of the cityHash64 of the event id, so that two events with the
--                 same time and path stay two keys
-- Pageviews, custom events and the other types are three arrays.
-- Keys of one millisecond sort by path, then id hash, not by event id as SPEC 13 orders events:
-- a query that finds such a millisecond in a session where the order matters computes that
-- session from its events instead (queries/analytics/paths.ts).
--
-- Every column aggregates with min, max or a set union, so a row stored twice (a replayed
-- insert, the backfill below running again) changes nothing, and a late or out-of-order event
-- lands in its place by its time.
--
-- Partitioned and merged like `session_facts` (0005): by the UTC day the session began, a day's
-- parts merged into one an hour after its last insert, so FINAL only merges the partitions still
-- receiving rows.
CREATE TABLE IF NOT EXISTS session_paths
(
    site_id       UInt32,
    session_id    UUID,
    session_start SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    session_end   SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    -- The visitor's 16 hex digits as a number (see `user_key` in 0005).
    user_key      SimpleAggregateFunction(min, UInt64),
    page_keys     SimpleAggregateFunction(groupUniqArrayArray, Array(UInt128)),
    event_keys    SimpleAggregateFunction(groupUniqArrayArray, Array(UInt128)),
    other_keys    SimpleAggregateFunction(groupUniqArrayArray, Array(UInt128)),
    INDEX session_start_idx session_start TYPE minmax GRANULARITY 1,
    INDEX session_end_idx session_end TYPE minmax GRANULARITY 1
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(UUIDv7ToDateTime(session_id))
ORDER BY (site_id, UUIDv7ToDateTime(session_id), session_id)
SETTINGS min_age_to_force_merge_seconds = 3600, min_age_to_force_merge_on_partition_only = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_paths_mv TO session_paths
AS SELECT
    site_id,
    session_id,
    min(timestamp) AS session_start,
    max(timestamp) AS session_end,
    min(reinterpretAsUInt64(reverse(unhex(user_id)))) AS user_key,
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + bitShiftLeft(toUInt128(bitShiftRight(cityHash64(pathname), 16)), 32)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type = 'pageview') AS page_keys,
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + bitShiftLeft(toUInt128(bitShiftRight(cityHash64(event_name), 16)), 32)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type = 'custom_event') AS event_keys,
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type NOT IN ('pageview', 'custom_event')) AS other_keys
FROM events
GROUP BY site_id, session_id;

-- Rows stored before this migration (running it twice only stores rows that merge away). A
-- large history's GROUP BY spills to disk instead of holding every session in memory.
INSERT INTO session_paths
SELECT
    site_id,
    session_id,
    min(timestamp),
    max(timestamp),
    min(reinterpretAsUInt64(reverse(unhex(user_id)))),
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + bitShiftLeft(toUInt128(bitShiftRight(cityHash64(pathname), 16)), 32)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type = 'pageview'),
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + bitShiftLeft(toUInt128(bitShiftRight(cityHash64(event_name), 16)), 32)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type = 'custom_event'),
    groupUniqArrayIf(
        bitShiftLeft(toUInt128(greatest(toUnixTimestamp64Milli(timestamp), 0)), 80)
            + toUInt128(bitAnd(cityHash64(event_id), 4294967295)),
        type NOT IN ('pageview', 'custom_event'))
FROM events
GROUP BY site_id, session_id
SETTINGS max_bytes_before_external_group_by = 1000000000;
