-- The UTC days each visitor has events on, as bits: one row per site, visitor and window once
-- merged. Window `block` covers the 64 days from day 32 × block (days since 1970), so every day
-- lies in two windows (its own block and the one before) and any run of up to 33 days lies
-- wholly inside one window. The distinct visitors of the whole days of a range are then the
-- rows of one window (or a few, for long ranges) whose bits meet the range's: a read of one row
-- per visitor instead of a distinct count over every session of the range (the unfiltered
-- overview, queries/analytics/visitors.ts).
--
-- `days` aggregates with a bitwise or, so a row stored twice (a replayed insert, the backfill
-- below running again or overlapping the view) changes nothing, and a late event only sets its
-- day's bit. Events before day 64 (March 1970) are left out; reads never ask for those days.
CREATE TABLE IF NOT EXISTS visitor_days
(
    site_id  UInt32,
    block    UInt32,
    -- The visitor id's 64 bits as a number, as `session_facts.user_key` (0005).
    user_key UInt64,
    -- Bit i: an event on day 32 × block + i.
    days     SimpleAggregateFunction(groupBitOr, UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY block
ORDER BY (site_id, block, user_key);

CREATE MATERIALIZED VIEW IF NOT EXISTS visitor_days_mv TO visitor_days
AS SELECT
    site_id,
    block,
    user_key,
    groupBitOr(bitShiftLeft(toUInt64(1), day - 32 * block)) AS days
FROM
(
    SELECT
        site_id,
        reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key,
        toUInt32(intDiv(toUnixTimestamp64Milli(timestamp), 86400000)) AS day
    FROM events
    WHERE timestamp >= toDateTime64(64 * 86400, 3, 'UTC')
)
ARRAY JOIN [intDiv(day, 32), intDiv(day, 32) - 1] AS block
GROUP BY site_id, block, user_key;

-- Rows stored before this migration (running it twice only stores rows that merge away).
INSERT INTO visitor_days
SELECT
    site_id,
    block,
    user_key,
    groupBitOr(bitShiftLeft(toUInt64(1), day - 32 * block))
FROM
(
    SELECT
        site_id,
        reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key,
        toUInt32(intDiv(toUnixTimestamp64Milli(timestamp), 86400000)) AS day
    FROM events
    WHERE timestamp >= toDateTime64(64 * 86400, 3, 'UTC')
)
ARRAY JOIN [intDiv(day, 32), intDiv(day, 32) - 1] AS block
GROUP BY site_id, block, user_key
SETTINGS max_bytes_before_external_group_by = 1000000000;
