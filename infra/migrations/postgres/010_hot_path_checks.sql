-- Foreign keys checked per row on the ingest hot path, replaced by the code that owns the rows.
-- Measured on 1,500 new profiles and their 3,000 summaries (a full-size batch, 1M profiles):
-- the workspace check was 15% of the profile insert, the profile check half of the summary upsert.
-- Workspaces are never deleted. Summaries are written only for profiles their transaction holds
-- locked or created, and deleteProfiles (profile-repository.ts) deletes a profile's summaries with
-- it, in one statement.
ALTER TABLE profiles DROP CONSTRAINT profiles_workspace_id_fkey;
ALTER TABLE profile_event_summaries DROP CONSTRAINT profile_event_summaries_profile_id_fkey;
