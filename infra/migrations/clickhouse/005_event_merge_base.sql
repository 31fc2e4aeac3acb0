-- needs: ClickHouse 24.11 (the MergeTree setting merge_selector_base; older servers refuse it as unknown)
-- Background merges take 15-20% of the worker's CPU under the mixed load, most of it rewriting
-- event rows: with the default merge selector base (5) a row is rewritten at every level on its
-- way to a part of ~1M rows. A base of 20 merges more parts at once and so less often (a quarter
-- less merge CPU under the mixed load), at the cost of more active parts.
-- Event reads do not use FINAL (each event id is counted once, uniqExact), so more parts cost
-- them little; profile_snapshots keeps the default: every segment query reads it with FINAL.
ALTER TABLE {db}.events MODIFY SETTING merge_selector_base = 20;
