-- Numbered 007 until two migrations shared that number; it is idempotent, so a database that ran it as 007 runs it once more.
-- Profiles and their event summaries are updated far more often than inserted. Room left on each
-- page lets Postgres update a row in place (a HOT update) when no indexed column changes, instead
-- of writing a new entry in every index. Applies to pages written from now on.
ALTER TABLE profiles SET (fillfactor = 80);
ALTER TABLE profile_event_summaries SET (fillfactor = 80);
