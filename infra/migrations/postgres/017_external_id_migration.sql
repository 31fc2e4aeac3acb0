-- External ids a rename deprecated (/users/external_ids/rename): each still names its profile until
-- /users/external_ids/remove removes it. Consulted only for external ids no profile holds, so the
-- look-ups of known users never read it.
CREATE TABLE deprecated_external_ids (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  external_id text NOT NULL,
  profile_id bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  deprecated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, external_id)
);
CREATE INDEX deprecated_external_ids_profile ON deprecated_external_ids (profile_id);

-- /users/export/ids by device_id (the reference's identifier of a push token's device).
CREATE INDEX push_tokens_device ON push_tokens (workspace_id, device_id) WHERE device_id IS NOT NULL;
