-- Teams of a workspace. The service has no team management of its own: a team comes to exist the
-- first time a SCIM user names it in a workspace, and keeps its id for every user and update after.
CREATE TABLE workspace_teams (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);
