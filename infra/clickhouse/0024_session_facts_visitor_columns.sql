-- The attributes of a session's visitor (its address and browser: those `constants_low` and
-- `constants_high` of 0015 hash) as dictionary-encoded columns of their own in `session_facts`,
-- for the filters tested on a session's row (queries/analytics/row-filters.ts). There a row is
-- tested only when its hashes agree, so these attributes are the same on every event of its
-- session, and any one event's value is the first event's: an `any` column, whose value a merge
-- takes from one of the rows merged, holds it as well as `first_event` does. (The tuple's own
-- elements cannot be dictionaries: the `min` of such a tuple is a tuple of text. A plain column
-- would merge the same way, but the engine refuses to create a table with one that is neither
-- a key nor an aggregate.) With a country filter, the filtered overview's session rows took
-- 165-170 instead of 187-197 ms at 10 M bench events (docs/benchmarks.md).
--
-- Each column's default is its `first_event` element: a row the view of 0015 inserts (which
-- does not name them) takes its values from its own first event, and a part stored before this
-- migration reads them from the tuple until the mutation below has written them. The mutation
-- rewrites the table's parts in the background (new part names: the builds and summaries keyed
-- by them are made again as after new events); running it again changes nothing.
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_country SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'country');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_region SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'region');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_city SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'city');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_browser SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'browser');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_browser_version SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'browser_version');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_operating_system SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'operating_system');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_operating_system_version SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'operating_system_version');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_device_type SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'device_type');
ALTER TABLE session_facts ADD COLUMN IF NOT EXISTS visitor_language SimpleAggregateFunction(any, LowCardinality(String)) DEFAULT tupleElement(first_event, 'language');

ALTER TABLE session_facts
    MATERIALIZE COLUMN visitor_country,
    MATERIALIZE COLUMN visitor_region,
    MATERIALIZE COLUMN visitor_city,
    MATERIALIZE COLUMN visitor_browser,
    MATERIALIZE COLUMN visitor_browser_version,
    MATERIALIZE COLUMN visitor_operating_system,
    MATERIALIZE COLUMN visitor_operating_system_version,
    MATERIALIZE COLUMN visitor_device_type,
    MATERIALIZE COLUMN visitor_language;
