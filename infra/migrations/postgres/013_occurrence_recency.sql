-- When a profile last had an event or purchase applied, kept on the summary rows a batch writes
-- anyway. A profile that only gets events used to have its whole row rewritten for a new
-- `updated_at` (170,000 rewrites of a mixed load of 300,000 objects, a fifth of Postgres' time
-- and most of the profiles table's dead rows); "most recently updated" (interface.md 4.1 rule 5,
-- 4.2 prioritization) now reads the later of the row's `updated_at` and this. Rows written before
-- this column are NULL: those events already moved the profile's `updated_at`.
ALTER TABLE profile_event_summaries ADD COLUMN applied_at timestamptz;
