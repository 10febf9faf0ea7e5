-- Everything the official browser client sends beyond pageviews, custom events, outbound clicks
-- and errors. Every statement is idempotent: the file can run again, and on a table that
-- already holds events.

-- Web vitals of `performance` events, one column each (NULL: not measured, and on every other
-- event type), so percentiles read plain floats instead of parsing properties. Milliseconds,
-- except CLS (a unitless score). `events_by_name` first: its view copies `SELECT *` by name,
-- and a column the target lacks would be dropped from rows stored in between.
ALTER TABLE events_by_name ADD COLUMN IF NOT EXISTS lcp Nullable(Float64);
ALTER TABLE events_by_name ADD COLUMN IF NOT EXISTS cls Nullable(Float64);
ALTER TABLE events_by_name ADD COLUMN IF NOT EXISTS inp Nullable(Float64);
ALTER TABLE events_by_name ADD COLUMN IF NOT EXISTS fcp Nullable(Float64);
ALTER TABLE events_by_name ADD COLUMN IF NOT EXISTS ttfb Nullable(Float64);
ALTER TABLE events ADD COLUMN IF NOT EXISTS lcp Nullable(Float64);
ALTER TABLE events ADD COLUMN IF NOT EXISTS cls Nullable(Float64);
ALTER TABLE events ADD COLUMN IF NOT EXISTS inp Nullable(Float64);
ALTER TABLE events ADD COLUMN IF NOT EXISTS fcp Nullable(Float64);
ALTER TABLE events ADD COLUMN IF NOT EXISTS ttfb Nullable(Float64);

-- Every table written from the ingest buffer, and every table a view fills from one, remembers
-- recent insert tokens (non_replicated_deduplication_window): a replayed segment lands once.

-- One row per identify call, as received: the anonymous visitor (`user_id`, computed as for
-- events), the id the site gave it, and the traits sent (key -> the value's JSON text; JSON
-- `null` removes a trait). The two tables below are derived from it by views, so one insert
-- (one write-ahead segment, one deduplication token) stores the whole call.
CREATE TABLE IF NOT EXISTS identifies
(
    site_id            UInt32,
    timestamp          DateTime64(3, 'UTC') CODEC(Delta, LZ4),
    event_id           UUID,
    user_id            String,
    identified_user_id String,
    traits             Map(String, String) CODEC(ZSTD(3)),
    is_new_identify    Bool
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (site_id, identified_user_id, timestamp, event_id)
SETTINGS non_replicated_deduplication_window = 10000;

-- A user's profile, one row per trait once merged: the latest value of each key wins, so later
-- calls update the traits they name and keep the others (a `null` value marks a removed trait;
-- reads leave those out). Read with FINAL, or argMax(value, updated_at) per trait.
CREATE TABLE IF NOT EXISTS user_profiles
(
    site_id            UInt32,
    identified_user_id String,
    trait              String,
    value              String CODEC(ZSTD(3)),
    updated_at         DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (site_id, identified_user_id, trait)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_profiles_mv TO user_profiles
AS SELECT site_id, identified_user_id, trait, value, timestamp AS updated_at
FROM identifies
ARRAY JOIN mapKeys(traits) AS trait, mapValues(traits) AS value;

-- Which identified user an anonymous visitor is: the latest identify of that visitor wins.
-- Events keep the ids they were stored with; reads join through this table.
CREATE TABLE IF NOT EXISTS user_aliases
(
    site_id            UInt32,
    user_id            String,
    identified_user_id String,
    updated_at         DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (site_id, user_id)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_aliases_mv TO user_aliases
AS SELECT site_id, user_id, identified_user_id, timestamp AS updated_at
FROM identifies
WHERE is_new_identify;

-- Session replay: one row per rrweb batch as the client sent it (`events`: the JSON array,
-- compressed on disk), in the session the ingest assigned to the visitor when it arrived.
-- `start_time`/`end_time` are the batch's first and last rrweb timestamps (the browser's
-- clock). Each row keeps the retention in force when it was recorded; whole days expire
-- together (a part is dropped once every row in it is past its retention).
CREATE TABLE IF NOT EXISTS session_replay
(
    site_id            UInt32,
    session_id         UUID,
    timestamp          DateTime64(3, 'UTC'),
    batch_id           UUID,
    user_id            String,
    identified_user_id String,
    start_time         DateTime64(3, 'UTC'),
    end_time           DateTime64(3, 'UTC'),
    event_count        UInt32,
    size               UInt32,
    events             String CODEC(ZSTD(3)),
    page_url           String CODEC(ZSTD(3)),
    viewport_width     UInt16,
    viewport_height    UInt16,
    language           LowCardinality(String),
    retention_days     UInt16
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(timestamp)
ORDER BY (site_id, session_id, timestamp, batch_id)
TTL toDateTime(timestamp) + toIntervalDay(retention_days)
SETTINGS non_replicated_deduplication_window = 10000, ttl_only_drop_parts = 1;
