-- needs: ClickHouse 24.11 (the MergeTree setting merge_selector_base; older servers refuse it as unknown)
-- Snapshot parts merged five at a time (005 left them at the default for their FINAL reads)
-- rewrite the table's low levels again and again under small requests. At 20 the merge threads
-- take about half the CPU at 1,000 small requests a second. More small parts are active between
-- merges and FINAL reads them with the rest: a segment size at rest takes ~20 ms more at p99,
-- and less while a backlog drains.
ALTER TABLE {db}.profile_snapshots MODIFY SETTING merge_selector_base = 20;
