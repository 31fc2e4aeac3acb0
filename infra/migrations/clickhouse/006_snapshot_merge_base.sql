-- needs: ClickHouse 24.11 (the MergeTree setting merge_selector_base; older servers refuse it as unknown)
-- Snapshot parts were merged five at a time (005 left them at the default for their FINAL reads),
-- and under small requests those merges rewrote the table's low levels again and again. At 20:
-- on the engine alone, ~35-row snapshot parts 14 times a second, the merge threads 0.03 of a core
-- against 0.27 (54 merges a minute against ~370); in the service at 1,000 small requests a second,
-- its merge threads 0.53-0.77 CPU-s in 10 s against 0.99-1.24. More small parts are active between
-- merges, and FINAL reads them with the rest: segment size at rest p99 72-84 ms against 56-59
-- (p50 the same), while a backlog drains 187-242 against 217-306 (README, Mixed load, twenty-fourth round).
ALTER TABLE {db}.profile_snapshots MODIFY SETTING merge_selector_base = 20;
