import type { ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import { NoProfileFields } from '../../shared/domain/profile-fields.js'

/** A stored profile row for unit tests: every profile field empty, version 3, random bucket 7. */
export function storedProfile(id: number, fields: Partial<ProfileRow> = {}, workspaceId = 'ws-1'): ProfileRow {
  return {
    id,
    workspace_id: workspaceId,
    service_id: `svc-${id}`,
    external_id: null,
    ...NoProfileFields,
    custom_attributes: {},
    random_bucket: 7,
    push_import_anonymous: false,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    version: 3,
    ...fields,
  }
}
