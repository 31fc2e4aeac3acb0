-- When a profile last had an event or purchase applied, kept on the summary rows a batch writes
-- anyway, so that a profile that only gets events is not rewritten whole for a new `updated_at`
-- (under the mixed load such rewrites take a fifth of Postgres' time and most of the profiles
-- table's dead rows); "most recently updated" (interface.md 4.1 rule 5, 4.2 prioritization)
-- reads the later of the row's `updated_at` and this. Rows written before this column are NULL:
-- those events already moved the profile's `updated_at`.
ALTER TABLE profile_event_summaries ADD COLUMN applied_at timestamptz;
