import { mkdtemp, rm, stat } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countWorkspaces } from '../../shared/db/repositories/workspace-repository.js'
import { ensureFirstStartCredentials } from '../../services/bootstrap.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
const dirs: string[] = []

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'uds-bootstrap-'))
  dirs.push(dir)
  return dir
}

describe('first start', () => {
  it('creates the default workspace and its credentials once when processes start together on an empty database', async () => {
    expect(await countWorkspaces(env.ctx.pg)).toBe(0)
    const configs = await Promise.all([1, 2, 3, 4].map(async () => ({ ...env.config, DATA_DIR: await dataDir() })))
    // Connections open beforehand, so that the starts' transactions overlap rather than queue for one.
    await Promise.all(configs.map(() => env.ctx.pg.query('SELECT 1')))
    const admin = { token: 'generated-admin-token', generated: true }
    const results = await Promise.all(configs.map((c) => ensureFirstStartCredentials(env.ctx.pg, { ...c, ADMIN_TOKEN: undefined }, admin)))

    const created = results.filter((r) => r?.created)
    expect(created).toHaveLength(1)
    expect(created[0]!.credentials).toMatchObject({ admin_token: 'generated-admin-token', workspace_name: 'default', scim_request_origin: 'localhost' })
    expect(await countWorkspaces(env.ctx.pg)).toBe(1)

    // A later start of the process that created them reads them back from its data directory, as not created now.
    const creator = configs[results.indexOf(created[0])]
    const file = path.join(creator.DATA_DIR, 'credentials.json')
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    expect(await ensureFirstStartCredentials(env.ctx.pg, creator, admin)).toEqual({ credentials: created[0]!.credentials, created: false })
  })
})
