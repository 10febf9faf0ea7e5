-- The visitor id's 64 bits as a number on every event, as the rollups have it (`user_key`,
-- 0005): visitor ids are 16 hex digits (SPEC 6), so the number tells visitors apart exactly as
-- the text does. Distinct visitors and per-visitor groups read from the events (filtered
-- buckets, the filtered users list, a range's partial days, retention) then hash eight bytes a
-- row instead of decoding and hashing the text, or converting it on every read (at 10 M bench
-- events: the filtered day buckets' read of the events 128 against 194 ms, the filtered users
-- list's ranking 133 against 171; whole answers alternated in one process, filtered day buckets
-- 417 against 492 ms, hour buckets 421 against 514; docs/benchmarks.md).
--
-- Computed by the engine on insert (and, for a part the mutation below has not rewritten yet,
-- on read), so every writer of `events` stays as it is; on a cluster the Distributed table
-- declares it the same way and leaves it out of what it forwards. Running this again changes
-- nothing.
ALTER TABLE events ADD COLUMN IF NOT EXISTS user_key UInt64 MATERIALIZED reinterpretAsUInt64(reverse(unhex(user_id)));
ALTER TABLE events MATERIALIZE COLUMN user_key;
