import { randomUUID } from 'node:crypto'
import { hashSecret, newSecret } from '../../secrets.js'
import { query, type Queryable } from '../pool.js'

export interface ApiKeyRecord {
  id: string
  workspace_id: string
  permissions: string[]
  key_hash: Buffer
}

/** Creates an API key; the plain key is returned once and only its hash is stored. */
export async function createApiKey(
  db: Queryable,
  input: { workspaceId: string; name: string; permissions: string[] },
): Promise<{ id: string; key: string; permissions: string[] }> {
  const id = randomUUID()
  const key = newSecret('uds_key')
  await query(
    db,
    'createApiKey',
    'INSERT INTO api_keys (id, workspace_id, name, key_hash, permissions) VALUES ($1, $2, $3, $4, $5)',
    [id, input.workspaceId, input.name, hashSecret(key), input.permissions],
  )
  return { id, key, permissions: input.permissions }
}

export async function findApiKeyByHash(db: Queryable, hash: Buffer): Promise<ApiKeyRecord | undefined> {
  const r = await query<ApiKeyRecord>(
    db,
    'findApiKeyByHash',
    'SELECT id, workspace_id, permissions, key_hash FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
    [hash],
  )
  return r.rows[0]
}

export async function revokeApiKey(db: Queryable, id: string): Promise<boolean> {
  const r = await query(db, 'revokeApiKey', 'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id])
  return r.rowCount === 1
}

/** Replaces a live key's permissions; false for an unknown or revoked key. */
export async function setApiKeyPermissions(db: Queryable, id: string, permissions: string[]): Promise<boolean> {
  const r = await query(db, 'setApiKeyPermissions', 'UPDATE api_keys SET permissions = $2 WHERE id = $1 AND revoked_at IS NULL', [
    id,
    permissions,
  ])
  return r.rowCount === 1
}

export interface ScimTokenRecord {
  id: string
  request_origin: string
  token_hash: Buffer
}

export async function createScimToken(db: Queryable, requestOrigin: string): Promise<{ id: string; token: string }> {
  const id = randomUUID()
  const token = newSecret('uds_scim')
  await query(db, 'createScimToken', 'INSERT INTO scim_tokens (id, token_hash, request_origin) VALUES ($1, $2, $3)', [
    id,
    hashSecret(token),
    requestOrigin,
  ])
  return { id, token }
}

export async function findScimTokenByHash(db: Queryable, hash: Buffer): Promise<ScimTokenRecord | undefined> {
  const r = await query<ScimTokenRecord>(
    db,
    'findScimTokenByHash',
    'SELECT id, request_origin, token_hash FROM scim_tokens WHERE token_hash = $1 AND revoked_at IS NULL',
    [hash],
  )
  return r.rows[0]
}

export async function revokeScimToken(db: Queryable, id: string): Promise<boolean> {
  const r = await query(db, 'revokeScimToken', 'UPDATE scim_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id])
  return r.rowCount === 1
}
