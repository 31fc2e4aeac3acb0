-- When the service deleted the local files of an export whose download link had expired.
ALTER TABLE exports ADD COLUMN files_purged_at timestamptz;
