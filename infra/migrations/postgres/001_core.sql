-- Workspaces and their credentials.
CREATE TABLE workspaces (
  id text PRIMARY KEY,
  name text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  global_control_percent numeric(5,2) NOT NULL DEFAULT 0,
  export_storage jsonb,
  rate_limits jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name text NOT NULL,
  key_hash bytea NOT NULL UNIQUE,
  permissions text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

CREATE TABLE scim_tokens (
  id text PRIMARY KEY,
  token_hash bytea NOT NULL UNIQUE,
  request_origin text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

CREATE TABLE blocked_external_ids (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  external_id text NOT NULL,
  PRIMARY KEY (workspace_id, external_id)
);

-- User profiles. `version` grows with every committed change; ClickHouse snapshots keep the highest.
CREATE TABLE profiles (
  id bigserial PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  service_id text NOT NULL UNIQUE,
  external_id text,
  email text,
  phone text,
  first_name text,
  last_name text,
  gender text,
  dob text,
  home_city text,
  country text,
  language text,
  time_zone text,
  email_subscribe text,
  push_subscribe text,
  push_opted_in_at timestamptz,
  custom_attributes jsonb NOT NULL DEFAULT '{}',
  random_bucket integer NOT NULL,
  push_import_anonymous boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  version bigint NOT NULL DEFAULT 1
);
CREATE UNIQUE INDEX profiles_external_id ON profiles (workspace_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX profiles_email ON profiles (workspace_id, email) WHERE email IS NOT NULL;
CREATE INDEX profiles_phone ON profiles (workspace_id, phone) WHERE phone IS NOT NULL;

CREATE TABLE profile_aliases (
  workspace_id text NOT NULL,
  alias_label text NOT NULL,
  alias_name text NOT NULL,
  profile_id bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  PRIMARY KEY (workspace_id, alias_label, alias_name)
);
CREATE INDEX profile_aliases_profile ON profile_aliases (profile_id);

CREATE TABLE push_tokens (
  workspace_id text NOT NULL,
  app_id text NOT NULL,
  token text NOT NULL,
  profile_id bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  device_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, app_id, token)
);
CREATE INDEX push_tokens_profile ON push_tokens (profile_id);

-- Per-user custom event and purchase summaries (all time; the export applies the 90-day window).
CREATE TABLE profile_event_summaries (
  profile_id bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('event', 'purchase')),
  name text NOT NULL,
  first_at timestamptz NOT NULL,
  last_at timestamptz NOT NULL,
  count bigint NOT NULL,
  PRIMARY KEY (profile_id, kind, name)
);

-- Subscription groups and states.
CREATE TABLE subscription_groups (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name text NOT NULL,
  channel text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp')),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

CREATE TABLE profile_subscriptions (
  profile_id bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  group_id text NOT NULL REFERENCES subscription_groups(id) ON DELETE CASCADE,
  state text NOT NULL CHECK (state IN ('subscribed', 'unsubscribed')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (profile_id, group_id)
);

-- Group states set for an email or phone that no profile had yet; applied when one gets it.
CREATE TABLE address_subscriptions (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  group_id text NOT NULL REFERENCES subscription_groups(id) ON DELETE CASCADE,
  address text NOT NULL,
  state text NOT NULL CHECK (state IN ('subscribed', 'unsubscribed')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, address)
);

-- Email subscription state uploaded for an address (with or without a profile).
CREATE TABLE email_states (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  email text NOT NULL,
  state text NOT NULL CHECK (state IN ('opted_in', 'subscribed', 'unsubscribed')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, email)
);

CREATE TABLE email_spam_list (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  email text NOT NULL,
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, email)
);

CREATE TABLE email_bounce_list (
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  email text NOT NULL,
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, email)
);

-- Segments and exports.
CREATE TABLE segments (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name text NOT NULL,
  filter jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

CREATE TABLE exports (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('segment', 'global_control_group')),
  segment_id text,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
  request jsonb NOT NULL,
  object_prefix text NOT NULL,
  users_exported bigint NOT NULL DEFAULT 0,
  files jsonb NOT NULL DEFAULT '[]',
  url text,
  error text,
  started_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
-- At most one running export per segment.
CREATE UNIQUE INDEX exports_one_running_per_segment ON exports (workspace_id, segment_id)
  WHERE status IN ('queued', 'running') AND segment_id IS NOT NULL;

-- Exactly-once ledger: a job's Postgres effects and its marker commit together; `outbox` holds
-- what must still reach ClickHouse after the commit, replayed on a retry until `completed`.
CREATE TABLE applied_jobs (
  job_key text PRIMARY KEY,
  workspace_id text NOT NULL,
  outbox jsonb,
  completed boolean NOT NULL DEFAULT false,
  applied_at timestamptz NOT NULL DEFAULT now()
);

-- Dashboard users (SCIM) are company-wide.
CREATE TABLE dashboard_users (
  id text PRIMARY KEY,
  user_name text NOT NULL,
  given_name text NOT NULL,
  family_name text NOT NULL,
  department text NOT NULL,
  permissions jsonb NOT NULL,
  last_sign_in_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX dashboard_users_user_name ON dashboard_users (lower(user_name));
