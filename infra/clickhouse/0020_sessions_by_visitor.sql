-- `visitor_sessions` (0019) again, in granules of 1,024 rows instead of 8,192. The users list
-- reads its listed visitors' rows by key there, and a visitor's few sessions share a granule with
-- thousands of other visitors' rows, each read whole, their id sets too: the 25 latest visitors
-- of 10 M bench events took 30 ms to read at 8,192 rows a granule and 20 ms at 1,024 (the same
-- rows in four parts each; 19 ms at 256). A table's granule size is fixed when it is made, so it
-- is made anew under a name that says what it holds, filled like 0019 from `session_facts` once
-- its own view runs (events stored meanwhile reach it through one or the other), and the table
-- of 0019 dropped. Every statement can run again: the rows aggregate as 0019's do.
CREATE TABLE IF NOT EXISTS sessions_by_visitor
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
ORDER BY (site_id, user_key, session_id)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS sessions_by_visitor_mv TO sessions_by_visitor
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
INSERT INTO sessions_by_visitor
SELECT site_id, user_key, session_id, session_start, session_end, identified, pageview_ids, event_ids
FROM session_facts;

DROP VIEW IF EXISTS visitor_sessions_mv;

DROP TABLE IF EXISTS visitor_sessions;
