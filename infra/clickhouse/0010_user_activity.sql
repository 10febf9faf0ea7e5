-- What the user profile of SPEC 13 (`users/:userId`, over all time) needs of one id's events:
-- one row per site, id and kind once merged, so that a profile reads a few rows by key instead
-- of every event's ids (queries/analytics/users.ts).
--
-- Every event is counted under its anonymous id and, when it carries one, under its identified
-- id as well; `kind` tells the three apart, as the profile selects them:
--   0  the event's anonymous id, the event without an identified id
--   1  the event's anonymous id, the event with an identified id
--   2  the event's identified id
-- A profile of id X reads the rows of X (every kind: events whose anonymous or identified id is
-- X) and the kind-0 rows of the visitors whose current alias is X.
--
-- Every column aggregates with min, max or a set union, so a row stored twice (a replayed
-- insert, the backfill below running again or overlapping the view) changes nothing, and the
-- rows of one id from several parts (or, on a cluster, several shards) add up exactly at read.
-- Counts are the sizes of the sets of (hashed) ids, as in `session_facts` (0005). "Latest"
-- follows (timestamp, event_id), as the event-level queries order events.
CREATE TABLE IF NOT EXISTS user_activity
(
    site_id      UInt32,
    id           String,
    kind         UInt8,
    first_seen   SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_seen    SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    latest       SimpleAggregateFunction(max, Tuple(
        timestamp DateTime64(3, 'UTC'),
        event_id UUID,
        user_id String,
        country String,
        region String,
        city String,
        browser String,
        operating_system String,
        device_type String,
        language String)),
    identified   SimpleAggregateFunction(max, Tuple(timestamp DateTime64(3, 'UTC'), event_id UUID, identified_user_id String)),
    session_ids  SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    pageview_ids SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    -- The events that are not pageviews (so an event's id is in one of the two sets).
    other_ids    SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64))
)
ENGINE = AggregatingMergeTree
ORDER BY (site_id, id, kind);

CREATE MATERIALIZED VIEW IF NOT EXISTS user_activity_mv TO user_activity
AS SELECT
    site_id,
    tupleElement(entry, 1) AS id,
    tupleElement(entry, 2) AS kind,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    max((timestamp, event_id, user_id, toString(country), toString(region), toString(city),
        toString(browser), toString(operating_system), toString(device_type), toString(language))) AS latest,
    max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))) AS identified,
    groupUniqArray(cityHash64(session_id)) AS session_ids,
    groupUniqArrayIf(cityHash64(event_id), type = 'pageview') AS pageview_ids,
    groupUniqArrayIf(cityHash64(event_id), type != 'pageview') AS other_ids
FROM events
ARRAY JOIN if(identified_user_id = '', [(user_id, toUInt8(0))],
    [(user_id, toUInt8(1)), (identified_user_id, toUInt8(2))]) AS entry
GROUP BY site_id, id, kind;

-- Rows stored before this migration (running it twice only stores rows that merge away). A
-- large history's GROUP BY spills to disk instead of holding every id in memory.
INSERT INTO user_activity
SELECT
    site_id,
    tupleElement(entry, 1) AS id,
    tupleElement(entry, 2) AS kind,
    min(timestamp),
    max(timestamp),
    max((timestamp, event_id, user_id, toString(country), toString(region), toString(city),
        toString(browser), toString(operating_system), toString(device_type), toString(language))),
    max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))),
    groupUniqArray(cityHash64(session_id)),
    groupUniqArrayIf(cityHash64(event_id), type = 'pageview'),
    groupUniqArrayIf(cityHash64(event_id), type != 'pageview')
FROM events
ARRAY JOIN if(identified_user_id = '', [(user_id, toUInt8(0))],
    [(user_id, toUInt8(1)), (identified_user_id, toUInt8(2))]) AS entry
GROUP BY site_id, id, kind
SETTINGS max_bytes_before_external_group_by = 1000000000;
