-- Per-day answers of the unfiltered page breakdowns (`metric` of pathname, entry and exit page,
-- event name), kept so that a range of whole days reads a few rows per day instead of every
-- session's keys (queries/analytics/summaries.ts).
--
-- A summary covers the sessions of one `session_paths` partition (the day a session began, the
-- partition key's day) that lie wholly inside that day, computed from the partition's single
-- part: `source_part` names it. A partition that gains a row (a late event, a replay) has a
-- second part until they merge, and the merged part has another name, so a summary is read only
-- while its part is still the partition's only one: it can never describe sessions that changed
-- since. Each value's counts are additive over disjoint sets of sessions; the row with `totals = 1`
-- holds the day's session and event totals (`s_part`, `e_part`). Written by the query service when
-- a read finds a settled day without one; rows of parts merged away are only never read again.
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
    e_part       UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, parameter, partition, source_part, totals, value);
