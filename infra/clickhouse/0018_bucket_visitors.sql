-- The distinct visitors of buckets of whole UTC hours within a UTC day or across one UTC
-- midnight (an hour, or a day in a zone whose offsets are whole hours), each as counted from its
-- days' rows of `visitor_hours` (0017) while each of those days, ended over an hour before, was
-- one part alone in its partition: `parts` names those parts. Such a part does not change (a late event gives its day
-- another part, a merge or a delete a new name), so a count is read again by its bucket's
-- instants and parts and reused while those parts are the days' only ones
-- (queries/analytics/quarters.ts). Written by the query service when a read finds a bucket of
-- settled days without one; rows of parts merged away are never read again. A row stored twice
-- holds the same count.
CREATE TABLE IF NOT EXISTS bucket_visitors
(
    site_id UInt32,
    -- The bucket's hours in range: the first instant and the one after the last (epoch seconds).
    start   UInt32,
    end     UInt32,
    parts   String,
    users   UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, start, end, parts);
