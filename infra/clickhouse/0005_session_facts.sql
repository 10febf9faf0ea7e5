-- One row per session once merged, with what the traffic analytics of SPEC 13 need from it: its
-- first and last event time, its visitor, the attributes of its first event, its entry and exit
-- pageview,
-- the latest identified id it carried, and the (hashed) ids of its events and pageviews. An
-- unfiltered answer counts the sessions lying wholly inside its range here (their events are all
-- in the range, so these are the session metrics over the range); the few sessions crossing a
-- range boundary are computed from `events`.
--
-- Every column aggregates with min, max or a set union, so a row stored twice (a replayed
-- insert, the backfill below running again or overlapping the view) changes nothing. Counts are
-- the sizes of the id sets: a replayed event has the same id and is counted once.
--
-- "First" and "last" follow (timestamp, event_id), as the event-level queries order a session's
-- events. Entry and exit tuples of events that are not pageviews carry a sentinel that loses
-- every comparison, so a session without pageviews has an empty entry and exit page.
--
-- With FINAL, read tuple elements with tupleElement(column, 'name'), never as the `column.name`
-- subcolumn: the engine then merges the subcolumn on its own (the least country, not the
-- country of the least event). A partition holding a single part has one row per session and is
-- read without FINAL, subcolumns and all (queries/analytics/rollup.ts).
--
-- Partitioned and merged like `sessions` (0003): by the UTC day the session began, a day's parts
-- merged into one an hour after its last insert, so FINAL only merges the partitions still
-- receiving rows.
CREATE TABLE IF NOT EXISTS session_facts
(
    site_id       UInt32,
    session_id    UUID,
    session_start SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    session_end   SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    -- The anonymous visitor: one per session (ingest keys sessions by visitor). Visitor ids are
    -- 16 hex digits (SPEC 6), so `user_key`, the same 64 bits as a number, tells visitors apart
    -- exactly as the text does, and counts distinct visitors several times faster.
    user_id       SimpleAggregateFunction(min, String),
    user_key      SimpleAggregateFunction(min, UInt64),
    first_event   SimpleAggregateFunction(min, Tuple(
        timestamp DateTime64(3, 'UTC'),
        event_id UUID,
        hostname String,
        referrer String,
        channel String,
        utm_source String,
        utm_medium String,
        utm_campaign String,
        utm_term String,
        utm_content String,
        browser String,
        browser_version String,
        operating_system String,
        operating_system_version String,
        device_type String,
        country String,
        region String,
        city String,
        language String)),
    entry         SimpleAggregateFunction(min, Tuple(timestamp DateTime64(3, 'UTC'), event_id UUID, pathname String)),
    exit          SimpleAggregateFunction(max, Tuple(timestamp DateTime64(3, 'UTC'), event_id UUID, pathname String)),
    identified    SimpleAggregateFunction(max, Tuple(timestamp DateTime64(3, 'UTC'), event_id UUID, identified_user_id String)),
    pageview_ids  SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    event_ids     SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64)),
    INDEX session_start_idx session_start TYPE minmax GRANULARITY 1,
    INDEX session_end_idx session_end TYPE minmax GRANULARITY 1
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(UUIDv7ToDateTime(session_id))
ORDER BY (site_id, UUIDv7ToDateTime(session_id), session_id)
SETTINGS min_age_to_force_merge_seconds = 3600, min_age_to_force_merge_on_partition_only = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_facts_mv TO session_facts
AS SELECT
    site_id,
    session_id,
    min(timestamp) AS session_start,
    max(timestamp) AS session_end,
    min(user_id) AS user_id,
    -- Of the aggregate above (the alias): hex digits order as the number does.
    reinterpretAsUInt64(reverse(unhex(user_id))) AS user_key,
    min((timestamp, event_id, toString(hostname), referrer, toString(channel),
        toString(utm_source), toString(utm_medium), toString(utm_campaign), utm_term, utm_content,
        toString(browser), toString(browser_version), toString(operating_system),
        toString(operating_system_version), toString(device_type), toString(country),
        toString(region), toString(city), toString(language))) AS first_event,
    min(if(type = 'pageview', (timestamp, event_id, toString(pathname)),
        (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), toUUID('ffffffff-ffff-ffff-ffff-ffffffffffff'), ''))) AS entry,
    max(if(type = 'pageview', (timestamp, event_id, toString(pathname)),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))) AS exit,
    max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))) AS identified,
    groupUniqArrayIf(cityHash64(event_id), type = 'pageview') AS pageview_ids,
    groupUniqArray(cityHash64(event_id)) AS event_ids
FROM events
GROUP BY site_id, session_id;

-- Rows stored before this migration (running it twice only stores rows that merge away). A
-- large history's GROUP BY spills to disk instead of holding every session in memory.
INSERT INTO session_facts
SELECT
    site_id,
    session_id,
    min(timestamp),
    max(timestamp),
    min(user_id),
    min(reinterpretAsUInt64(reverse(unhex(user_id)))),
    min((timestamp, event_id, toString(hostname), referrer, toString(channel),
        toString(utm_source), toString(utm_medium), toString(utm_campaign), utm_term, utm_content,
        toString(browser), toString(browser_version), toString(operating_system),
        toString(operating_system_version), toString(device_type), toString(country),
        toString(region), toString(city), toString(language))),
    min(if(type = 'pageview', (timestamp, event_id, toString(pathname)),
        (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), toUUID('ffffffff-ffff-ffff-ffff-ffffffffffff'), ''))),
    max(if(type = 'pageview', (timestamp, event_id, toString(pathname)),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))),
    max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
        (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), ''))),
    groupUniqArrayIf(cityHash64(event_id), type = 'pageview'),
    groupUniqArray(cityHash64(event_id))
FROM events
GROUP BY site_id, session_id
SETTINGS max_bytes_before_external_group_by = 1000000000;
