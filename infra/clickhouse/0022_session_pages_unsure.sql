-- Per row of `session_pages` (0016), whether the session's constant attributes differ between
-- its events (`session_facts.constants_low` and `constants_high` differ, 0015): such a session
-- is read from its events when a filter is on one of them. Tested on these two 64-bit columns
-- at every filtered read, the flag took 16-20 ms of the filtered pathnames' and page titles'
-- statement at 10 M bench events; as one byte computed at the build, about nothing
-- (docs/benchmarks.md).
--
-- Builds of an earlier layout (below 2) lack it: they are never read again, their days built
-- anew (as for 0021). Running it again changes nothing.
ALTER TABLE session_pages ADD COLUMN IF NOT EXISTS unsure UInt8 AFTER tied;
