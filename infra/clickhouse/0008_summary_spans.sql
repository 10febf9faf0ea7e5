-- Summaries of the keyed page breakdowns (pathname, entry and exit page, event name) now hold
-- every session of their partition, crossing midnight or not, with the first start and the last
-- end among them (`span_start`, `span_end`): a day's summary serves a range that holds that
-- span (queries/analytics/summaries.ts). Before, they held only the sessions lying wholly inside
-- the UTC day, and an answer had to find the others among every session of its range.
-- Summaries are rebuilt by the reads that find a day without one, so the old ones are dropped
-- rather than converted.
DROP TABLE IF EXISTS metric_summaries;

CREATE TABLE IF NOT EXISTS metric_summaries
(
    site_id      UInt32,
    parameter    LowCardinality(String),
    partition    UInt32,
    source_part  String,
    totals       UInt8,
    value        String,
    n_sessions   UInt64,
    n_events     UInt64,
    bounces      UInt64,
    top_ms       Int64,
    top_n        UInt64,
    s_part       UInt64,
    e_part       UInt64,
    span_start   DateTime64(3, 'UTC'),
    span_end     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, parameter, partition, source_part, totals, value);
