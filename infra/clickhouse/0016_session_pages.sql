-- Per settled day, one row per session with what the filtered page breakdowns read: the columns
-- the row filters test (migration 0015), and the session's pages as its keys in `session_paths`
-- give them, their times on page computed once (queries/analytics/pages.ts).
--
-- A day is a partition of both rollups (`session_facts`, `session_paths`: the UTC day a session
-- began) alone in one part in each. Its rows are computed from those two parts and kept under a
-- build id; `session_pages_builds` names the parts each build is of, with the first start and the
-- last end among its sessions (its span). A build is read only while both parts are still their
-- partitions' only ones, so it never describes sessions that changed since (a late event gives
-- the partition a new part, and the day a new build). Written by the query service when a read
-- finds a settled day without one; rows of builds whose parts merged away are only never read
-- again.
--
-- Per session: its pageviews; per distinct path of its pageviews (48-bit hashes, as in the keys)
-- their number and the summed milliseconds from each to the next key, as one number (the number
-- shifted left by 40 bits, plus the milliseconds: every array read costs a filtered answer about
-- 40 ms at 10 M events); the entry and exit pageview's path and milliseconds to the next key (-1:
-- none). Only the session's last key can lack a next one, so a path's pageviews with a next key
-- are its number less one where the exit pageview is that last key. `tied`: two of its keys share
-- a millisecond, or a number does not fit its bits; such a session is computed from its events
-- instead. Per distinct path and title of its pageviews (read from the events), the path's hash,
-- the title and how many pageviews have both: the filtered page titles.
CREATE TABLE IF NOT EXISTS session_pages
(
    site_id         UInt32,
    partition       UInt32,
    build_id        UUID,
    session_id      UUID,
    session_start   DateTime64(3, 'UTC'),
    session_end     DateTime64(3, 'UTC'),
    first_event     Tuple(
        country String,
        region String,
        city String,
        browser String,
        browser_version String,
        operating_system String,
        operating_system_version String,
        device_type String,
        language String),
    paths           Array(UInt64),
    constants_low   UInt64,
    constants_high  UInt64,
    pageviews       UInt32,
    tied            UInt8,
    page_hashes     Array(UInt64),
    page_counts     Array(UInt64),
    title_paths     Array(UInt64),
    titles          Array(LowCardinality(String)),
    title_counts    Array(UInt64),
    entry_hash      UInt64,
    entry_gap       Int64,
    exit_hash       UInt64,
    exit_gap        Int64
)
ENGINE = MergeTree
ORDER BY (site_id, partition, build_id, session_id);

-- One row per build, written after its rows: a build without one (an insert that failed half
-- way) is never read.
CREATE TABLE IF NOT EXISTS session_pages_builds
(
    site_id     UInt32,
    partition   UInt32,
    facts_part  String,
    paths_part  String,
    build_id    UUID,
    span_start  DateTime64(3, 'UTC'),
    span_end    DateTime64(3, 'UTC'),
    sessions    UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, partition, facts_part, paths_part);
