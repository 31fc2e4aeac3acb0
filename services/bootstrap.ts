import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { Config } from '../shared/config.js'
import { createApiKey, createScimToken } from '../shared/db/repositories/credential-repository.js'
import { lockFirstStart } from '../shared/db/repositories/first-start-repository.js'
import { countWorkspaces, createWorkspace } from '../shared/db/repositories/workspace-repository.js'
import type { Pool } from '../shared/db/pool.js'
import { withTransaction } from '../shared/db/pool.js'
import { Permissions } from '../shared/domain/permissions.js'
import { newSecret } from '../shared/secrets.js'

/** ADMIN_TOKEN from the environment, else the one generated on a first start into DATA_DIR/admin-token. */
export async function ensureAdminToken(config: Config): Promise<{ token: string; generated: boolean }> {
  if (config.ADMIN_TOKEN) return { token: config.ADMIN_TOKEN, generated: false }
  const file = path.resolve(config.DATA_DIR, 'admin-token')
  try {
    return { token: (await readFile(file, 'utf8')).trim(), generated: false }
  } catch {
    await mkdir(config.DATA_DIR, { recursive: true })
    const token = newSecret('uds_admin')
    await writeFile(file, `${token}\n`, { mode: 0o600, flag: 'wx' }).catch(async () => {
      /* another process wrote it first */
    })
    return { token: (await readFile(file, 'utf8')).trim(), generated: true }
  }
}

export interface FirstStartCredentials {
  /** The operator token: generated (also in DATA_DIR/admin-token), or left out when ADMIN_TOKEN sets it. */
  admin_token?: string
  workspace_id: string
  workspace_name: string
  api_key: string
  scim_token: string
  scim_request_origin: string
}

/**
 * On a first start with an empty database: the `default` workspace, an API key with every
 * permission and a SCIM token, written with the generated admin token to DATA_DIR/credentials.json
 * (mode 0600) and answered with `created`. Later starts answer what that file holds (the keys
 * themselves are only stored hashed in the database).
 */
export async function ensureFirstStartCredentials(
  pg: Pool,
  config: Config,
  admin: { token: string; generated: boolean },
): Promise<{ credentials: FirstStartCredentials; created: boolean } | undefined> {
  const file = path.resolve(config.DATA_DIR, 'credentials.json')
  const created = await withTransaction(pg, async (db) => {
    await lockFirstStart(db)
    if ((await countWorkspaces(db)) > 0) return undefined
    const ws = (await createWorkspace(db, 'default'))!
    const key = await createApiKey(db, { workspaceId: ws.id, name: 'default', permissions: [...Permissions] })
    const origin = 'localhost'
    const scim = await createScimToken(db, origin)
    return {
      ...(config.ADMIN_TOKEN ? {} : { admin_token: admin.token }),
      workspace_id: ws.id,
      workspace_name: ws.name,
      api_key: key.key,
      scim_token: scim.token,
      scim_request_origin: origin,
    }
  })
  if (created) {
    await mkdir(config.DATA_DIR, { recursive: true })
    await writeFile(file, `${JSON.stringify(created, null, 2)}\n`, { mode: 0o600 })
    return { credentials: created, created: true }
  }
  try {
    return { credentials: JSON.parse(await readFile(file, 'utf8')) as FirstStartCredentials, created: false }
  } catch {
    return undefined
  }
}
