-- The sessions of each visitor side by side: one row per site, visitor and session once merged,
-- with what the users list counts of a visitor's sessions (queries/analytics/users.ts). The
-- listed visitors are read by key here instead of from `session_facts` (0005), where a visitor's
-- sessions lie all over the range: the 25 latest visitors of 10 M bench events have about 3,000
-- sessions in nearly every granule, so every column read for them was read whole.
--
-- The columns are those of `session_facts` under the same names, aggregated alike: a row stored
-- twice (a replayed insert, the backfill below overlapping the view) changes nothing, and the
-- rows of one session from several parts add up at read (FINAL; a visitor's few thousand rows).
-- Partitioned by the month a session began, so merges stay within a month.
CREATE TABLE IF NOT EXISTS visitor_sessions
(
    site_id       UInt32,
    -- The visitor id's 64 bits as a number, as `session_facts.user_key`.
    user_key      UInt64,
    session_id    UUID,
    session_start SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    session_end   SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    identified    SimpleAggregateFunction(max, Tuple(timestamp DateTime64(3, 'UTC'), event_id UUID, identified_user_id String)),
    pageview_ids  SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    event_ids     SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(UUIDv7ToDateTime(session_id))
ORDER BY (site_id, user_key, session_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS visitor_sessions_mv TO visitor_sessions
AS SELECT
    site_id,
    reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key,
    session_id,
    min(timestamp) AS session_start,
    max(timestamp) AS session_end,
    max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))) AS identified,
    groupUniqArrayIf(cityHash64(event_id), type = 'pageview') AS pageview_ids,
    groupUniqArray(cityHash64(event_id)) AS event_ids
FROM events
GROUP BY site_id, user_key, session_id;

-- Sessions stored before this migration, from their rollup rows (the same aggregates).
INSERT INTO visitor_sessions
SELECT site_id, user_key, session_id, session_start, session_end, identified, pageview_ids, event_ids
FROM session_facts;
