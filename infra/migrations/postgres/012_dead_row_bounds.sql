-- Dead rows on the tables every track batch writes, bounded under a long send with autovacuum at
-- the server's defaults. Those defaults wait for a fifth of a table to be dead before vacuuming it
-- (200,000 dead rows on a million profiles) and re-analyze at a tenth; a table updated by every
-- batch then carries that much garbage in its pages and indexes between passes. Here a pass starts
-- at 2% dead (plus the 50-row threshold), an insert-mostly table is vacuumed at 5% new rows (its
-- visibility map kept current), and statistics follow at 2% changed.
-- Profiles and their event summaries are updated in place far more often than inserted: more room
-- on each page (fillfactor below 002's 80) keeps an update on its page as a HOT update, which
-- writes no index entry and whose dead version the next reader prunes without waiting for vacuum.
-- Applies to pages written from now on; a VACUUM FULL or pg_repack rewrites the old ones.
ALTER TABLE profiles SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02);
-- IF EXISTS: migration 014 drops the summaries, and this file must still run again on a migrated database.
ALTER TABLE IF EXISTS profile_event_summaries SET (fillfactor = 60, autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE profile_aliases SET (autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02);
-- The exactly-once ledger: a row inserted, marked completed and later pruned for every job, so it
-- churns through its whole size; vacuumed at 1% dead, and after every 10,000 inserts whatever its size.
ALTER TABLE applied_jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.02);
