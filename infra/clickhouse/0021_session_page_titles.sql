-- The filtered page titles of `session_pages` (0016) grouped by a number instead of the text.
-- Per session and distinct path and title of its pageviews, `title_hash_counts` holds the top 48
-- bits of the title's cityHash64 shifted left by 16 bits, plus how many pageviews have both (a
-- session with 65,536 or more is `tied`: computed from its events). The read filters this one
-- array by its paths and groups the numbers; each build names its titles (`title_names`, the
-- distinct titles of its rows) for the answer to name the numbers back. At 10 M bench events the
-- statement took 332 ms reading the titles and their counts as two arrays, 187-208 ms reading
-- this one (docs/benchmarks.md).
--
-- Builds of the earlier layout (`layout` 0) lack both columns, so they are never read again:
-- the days they covered are built anew, and the new build's row replaces the old one (the same
-- sorting key). The per-title counts the new column replaces are dropped. Every statement can
-- run again.
ALTER TABLE session_pages ADD COLUMN IF NOT EXISTS title_hash_counts Array(UInt64) AFTER titles;
ALTER TABLE session_pages DROP COLUMN IF EXISTS title_counts;
ALTER TABLE session_pages_builds ADD COLUMN IF NOT EXISTS title_names Array(String);
ALTER TABLE session_pages_builds ADD COLUMN IF NOT EXISTS layout UInt8;
