-- The rest of the SCIM User resource (RFC 7643 section 4.1) that identity providers send and read
-- back: externalId (Entra ID matches on it), displayName, name.formatted, active, emails, and a
-- version counter behind meta.version and the ETag, raised by every change so If-Match can be
-- checked against the locked row. Idempotent.
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS external_id text;
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS display_name text;
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS formatted_name text;
-- false: the account is kept with its permissions but refused dashboard access (docs/scim.md).
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS active boolean NOT NULL DEFAULT true;
-- [{value, type?, primary?}], as RFC 7643 section 2.4 describes a multi-valued attribute.
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS emails jsonb NOT NULL DEFAULT '[]';
ALTER TABLE dashboard_users ADD COLUMN IF NOT EXISTS version integer NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS dashboard_users_external_id ON dashboard_users (external_id);
