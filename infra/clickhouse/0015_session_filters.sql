-- What a filter needs to be tested on a session's `session_facts` row instead of its events
-- (queries/analytics/filters.ts): a filtered answer then reads one row per session, as an
-- unfiltered one does, instead of finding and grouping the range's matching events by session
-- (at 10 M bench events the matching events alone took 150-200 ms of a 370 ms filtered
-- overview; docs/benchmarks.md).
--
-- - `paths`: the distinct paths of the session's events, every type, as cityHash64 of the
--   text. A path filter is tested on the site's distinct paths (`site_paths`, below), and a
--   session matches when one of its paths is among those that pass.
-- - `constants_low`, `constants_high`: the least and greatest cityHash64 of the attributes that
--   come from the visitor's address and browser (country, region, city, browser and operating
--   system with their versions, device type, language). The anonymous visitor is a hash of
--   the address and user agent (SPEC 6) and a session belongs to one visitor, so these are the
--   same on every event of nearly every session; where the two hashes are equal the session's
--   first event tells them for all its events. A session whose events differ (a device type
--   from the screen width, a language sent by the page, an enrichment database replaced
--   mid-session) has two different hashes and is tested on its events.
--
-- Rows stored before this migration take the defaults, an empty path set and a low hash above
-- the high one: such a row is never tested on its own, and the backfill below merges into it.
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS paths SimpleAggregateFunction(groupUniqArrayArray, Array(UInt64));
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS constants_low SimpleAggregateFunction(min, UInt64) DEFAULT 18446744073709551615;
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS constants_high SimpleAggregateFunction(max, UInt64) DEFAULT 0;

-- Sessions whose hashes differ are few: a filtered read finds them first (to test them on their
-- events), and this index lets it skip every granule without one (the difference is 0 exactly
-- when the hashes agree; the defaults' wraps around to 1). At 10 M bench events the lookup read
-- 24 instead of 86 ms.
ALTER TABLE session_facts ADD INDEX IF NOT EXISTS constants_idx (constants_high - constants_low) TYPE minmax GRANULARITY 1;
ALTER TABLE session_facts MATERIALIZE INDEX constants_idx;

-- Every distinct path of a site's events, every type: the names a path filter is tested on.
CREATE TABLE IF NOT EXISTS site_paths
(
    site_id  UInt32,
    pathname String
)
ENGINE = ReplacingMergeTree
ORDER BY (site_id, pathname);

CREATE MATERIALIZED VIEW IF NOT EXISTS site_paths_mv TO site_paths
AS SELECT DISTINCT site_id, toString(pathname) AS pathname
FROM events;

INSERT INTO site_paths
SELECT DISTINCT site_id, toString(pathname)
FROM events;

-- The view of 0005 again, with the new columns. Events stored between the two statements
-- reach `session_facts` through the backfill after them, which reads every event.
DROP VIEW IF EXISTS session_facts_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_facts_mv TO session_facts
AS SELECT
    site_id,
    session_id,
    min(timestamp) AS session_start,
    max(timestamp) AS session_end,
    min(user_id) AS user_id,
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
    groupUniqArray(cityHash64(event_id)) AS event_ids,
    groupUniqArray(cityHash64(toString(pathname))) AS paths,
    min(cityHash64(toString(country), toString(region), toString(city), toString(browser),
        toString(browser_version), toString(operating_system), toString(operating_system_version),
        toString(device_type), toString(language))) AS constants_low,
    max(cityHash64(toString(country), toString(region), toString(city), toString(browser),
        toString(browser_version), toString(operating_system), toString(operating_system_version),
        toString(device_type), toString(language))) AS constants_high
FROM events
GROUP BY site_id, session_id;

-- Every session again, whole: the rows merge with the stored ones (each column a min, max or
-- set union of the same events), filling the new columns. A large history's GROUP BY spills
-- to disk instead of holding every session in memory. The columns named: the table has more
-- since (0024), each with a default of its own.
INSERT INTO session_facts (site_id, session_id, session_start, session_end, user_id, user_key,
    first_event, entry, exit, identified, pageview_ids, event_ids, paths, constants_low, constants_high)
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
    groupUniqArray(cityHash64(event_id)),
    groupUniqArray(cityHash64(toString(pathname))),
    min(cityHash64(toString(country), toString(region), toString(city), toString(browser),
        toString(browser_version), toString(operating_system), toString(operating_system_version),
        toString(device_type), toString(language))),
    max(cityHash64(toString(country), toString(region), toString(city), toString(browser),
        toString(browser_version), toString(operating_system), toString(operating_system_version),
        toString(device_type), toString(language)))
FROM events
GROUP BY site_id, session_id
SETTINGS max_bytes_before_external_group_by = 1000000000;
