-- The standard fields of the reference's user attributes object that interface.md 2.4 does not
-- list, each a column like the others (shared/domain/profile-fields.ts; docs/track.md): before,
-- /users/track stored them as custom attributes. last_coordinates is interface.md's, set by the
-- reference's current_location. Flags are false unless set; the rest null. Adding a nullable
-- column, or one with a constant default, rewrites no row.
ALTER TABLE profiles
  ADD COLUMN IF NOT EXISTS last_coordinates jsonb,
  ADD COLUMN IF NOT EXISTS image_url text,
  ADD COLUMN IF NOT EXISTS date_of_first_session timestamptz,
  ADD COLUMN IF NOT EXISTS date_of_last_session timestamptz,
  ADD COLUMN IF NOT EXISTS marked_email_as_spam_at timestamptz,
  ADD COLUMN IF NOT EXISTS email_open_tracking_disabled boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS email_click_tracking_disabled boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS facebook jsonb,
  ADD COLUMN IF NOT EXISTS twitter jsonb;
