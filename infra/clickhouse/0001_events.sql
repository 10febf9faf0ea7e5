-- One row per tracked event. Site first, then time, in the sort key: every read filters by
-- site_id and a time range. event_id ends the key so that paging ties on one millisecond
-- have a total order.
CREATE TABLE IF NOT EXISTS events
(
    site_id                  UInt32,
    timestamp                DateTime64(3, 'UTC') CODEC(Delta, ZSTD(1)),
    event_id                 UUID,
    type                     LowCardinality(String),
    event_name               LowCardinality(String),
    -- Properties as sent (JSON object text) for reads, and as a key -> value map for fast
    -- per-key aggregation: string values as they are, other values as JSON text.
    properties               String CODEC(ZSTD(3)),
    props                    Map(LowCardinality(String), String) CODEC(ZSTD(3)),
    session_id               UUID,
    user_id                  String,
    identified_user_id       String,
    -- Paths repeat: a dictionary lets filters and goal patterns run once per distinct path.
    pathname                 LowCardinality(String),
    querystring              String CODEC(ZSTD(3)),
    hostname                 LowCardinality(String),
    page_title               String CODEC(ZSTD(3)),
    referrer                 String CODEC(ZSTD(3)),
    channel                  LowCardinality(String),
    utm_source               LowCardinality(String),
    utm_medium               LowCardinality(String),
    utm_campaign             LowCardinality(String),
    utm_term                 String,
    utm_content              String,
    browser                  LowCardinality(String),
    browser_version          LowCardinality(String),
    operating_system         LowCardinality(String),
    operating_system_version LowCardinality(String),
    device_type              LowCardinality(String),
    language                 LowCardinality(String),
    country                  LowCardinality(String),
    region                   LowCardinality(String),
    city                     LowCardinality(String),
    lat                      Float32,
    lon                      Float32,
    screen_width             UInt16,
    screen_height            UInt16
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (site_id, timestamp, event_id)
-- Remembers the tokens of recent inserts so a replayed batch (same insert_deduplication_token)
-- is dropped instead of stored twice.
SETTINGS non_replicated_deduplication_window = 10000, index_granularity = 8192;
