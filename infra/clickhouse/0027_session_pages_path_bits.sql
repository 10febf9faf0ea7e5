-- Per row of `session_pages_by_country` (0025, 0026), the session's paths as bits of one number:
-- bit i (0-62) for the i-th of its build's most visited paths, `session_pages_builds.bit_paths`
-- (the 63 paths most of the day's sessions hold, ties by hash, in one fixed order of them, so
-- that days of the same paths give a filter one mask), and bit 63 for any other path. A path
-- filter then tests one number per row where it tested the `paths` array: a row passes when it
-- has a bit of the passing paths among its build's, or bit 63 and a passing path outside them in
-- its array, which is read only where a passing path is outside some build's list
-- (queries/analytics/pages.ts). At 10 M bench events the filtered overview's
-- session totals took 139 ms against 192 with the array (the same rows, docs/benchmarks.md).
--
-- Builds with the columns carry layout 5 in `session_pages_builds`; those of layout 4 (every
-- row's bits 0) are never read again, their days built anew. Running it again changes nothing.
ALTER TABLE session_pages_by_country ADD COLUMN IF NOT EXISTS path_bits UInt64;
ALTER TABLE session_pages_builds ADD COLUMN IF NOT EXISTS bit_paths Array(UInt64);
