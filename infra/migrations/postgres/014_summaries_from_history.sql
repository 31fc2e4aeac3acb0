-- Event and purchase summaries are read from the event history in ClickHouse, which holds every
-- occurrence once under the profile that owns it now: exports always did, /users/export/ids and
-- the recency of "most recently updated" (the occurrence's insertion time) now do too. A track
-- batch then writes no row for an occurrence, and a merge moves none: upserting the summary rows
-- was a quarter of Postgres' time under a mixed load (199,000 rows a run of 300,000 objects,
-- 2.6 WAL records each), and their dead versions a hot table of their own.
DROP TABLE IF EXISTS profile_event_summaries;
