-- The first event's attributes in `session_pages` (0016) as dictionary-encoded text, as the
-- events hold their page titles (0012): a row filter on one of them (a country, a browser) then
-- tests small numbers against the few distinct values of each part instead of every row's text.
-- At 10 M bench events the filtered pathnames' and page titles' statements took 252 and 218 ms
-- with text, 235 and 202 with this (the same rows in one part, docs/benchmarks.md). The stored
-- values do not change, so builds stay readable.
--
-- A mutation: existing parts are rewritten in the background (reads convert a part not yet
-- rewritten as they go, so answers do not change meanwhile); running it again changes nothing.
ALTER TABLE session_pages MODIFY COLUMN first_event Tuple(
    country LowCardinality(String),
    region LowCardinality(String),
    city LowCardinality(String),
    browser LowCardinality(String),
    browser_version LowCardinality(String),
    operating_system LowCardinality(String),
    operating_system_version LowCardinality(String),
    device_type LowCardinality(String),
    language LowCardinality(String));
