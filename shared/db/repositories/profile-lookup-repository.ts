import type { IdentifierKind } from '../../domain/identifiers.js'
import { query, type Queryable } from '../pool.js'

export interface ReadLookup {
  externalIds: string[]
  aliases: { alias_label: string; alias_name: string }[]
  serviceIds: string[]
  emails: string[]
  phones: string[]
  /** Device ids of push tokens (the reference's `device_id` of /users/export/ids). */
  deviceIds?: string[]
}

export interface ReadMatch {
  kind: IdentifierKind | 'device_id'
  key: string
  profile_id: number
}

/**
 * Every profile each identifier names (an email or phone may name several), without locking. An
 * external id names its user as a primary id or as a deprecated one it kept (a rename), and a
 * device id the holders of push tokens of that device.
 */
export async function findProfilesForRead(db: Queryable, workspaceId: string, l: ReadLookup): Promise<ReadMatch[]> {
  const r = await query<ReadMatch>(
    db,
    'findProfilesForRead',
    `SELECT 'external_id' AS kind, external_id AS key, id AS profile_id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2::text[])
     UNION ALL SELECT 'external_id', external_id, profile_id FROM deprecated_external_ids WHERE workspace_id = $1 AND external_id = ANY($2::text[])
     UNION ALL SELECT 'service_id', service_id, id FROM profiles WHERE workspace_id = $1 AND service_id = ANY($3::text[])
     UNION ALL SELECT 'email', email, id FROM profiles WHERE workspace_id = $1 AND email = ANY($4::text[])
     UNION ALL SELECT 'phone', phone, id FROM profiles WHERE workspace_id = $1 AND phone = ANY($5::text[])
     UNION ALL SELECT 'user_alias', a.alias_label || chr(31) || a.alias_name, a.profile_id FROM profile_aliases a
        JOIN unnest($6::text[], $7::text[]) AS w(label, name) ON a.alias_label = w.label AND a.alias_name = w.name
       WHERE a.workspace_id = $1
     UNION ALL SELECT DISTINCT 'device_id', device_id, profile_id FROM push_tokens WHERE workspace_id = $1 AND device_id = ANY($8::text[])`,
    [
      workspaceId,
      l.externalIds,
      l.serviceIds,
      l.emails,
      l.phones,
      l.aliases.map((a) => a.alias_label),
      l.aliases.map((a) => a.alias_name),
      l.deviceIds ?? [],
    ],
  )
  return r.rows
}
