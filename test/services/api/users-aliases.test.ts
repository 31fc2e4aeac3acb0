import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { readSnapshots } from '../../../shared/clickhouse/snapshot-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { until } from '../../helpers/wait.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity'] })
})
afterAll(async () => {
  await env.close()
})
beforeEach(async () => {
  ws = await env.workspace()
})

const post = (path: string, body: unknown, key = ws.key) => env.call('POST', path, { key, body })
const apply = (path: string, body: unknown) => env.writeAndWait(ws.key, path, body)
const read = (body: unknown) => env.readUsers(ws.key, body)

describe('POST /users/alias/new', () => {
  it('adds an alias to the identified user and creates an alias-only user, read back', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'u1', first_name: 'Ann' }] })
    const { response, progress } = await apply('/users/alias/new', {
      user_aliases: [
        { external_id: 'u1', alias_name: 'a-1', alias_label: 'crm' },
        { alias_name: 'anon-7', alias_label: 'device' },
      ],
    })
    expect(response).toEqual({ aliases_processed: 2, message: 'success' })
    expect(progress.errors).toBeUndefined()
    const byId = await read({ external_ids: ['u1'] })
    expect(byId.users[0].user_aliases).toEqual([{ alias_name: 'a-1', alias_label: 'crm' }])
    const byAlias = await read({ user_aliases: [{ alias_name: 'a-1', alias_label: 'crm' }] })
    expect(byAlias.users[0].external_id).toBe('u1')
    const aliasOnly = await read({ user_aliases: [{ alias_name: 'anon-7', alias_label: 'device' }] })
    expect(aliasOnly.users).toHaveLength(1)
    expect(aliasOnly.users[0].external_id).toBeUndefined()
    expect(aliasOnly.users[0].user_aliases).toEqual([{ alias_name: 'anon-7', alias_label: 'device' }])
    // The exported snapshot shows the alias too.
    const { rows } = await env.ctx.pg.query<{ id: string }>('SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, 'u1'])
    const id = Number(rows[0].id)
    const snapshots = await until('snapshot with the alias', () => readSnapshots(env.clickhouse, ws.id, [id]), (s) => s.get(id)?.user_aliases !== undefined)
    expect(snapshots.get(id)?.user_aliases).toEqual([{ alias_name: 'a-1', alias_label: 'crm' }])
  })

  it('orders an alias-only user before the next track request naming the alias, as a client sends them back to back', async () => {
    const alias = { alias_name: 'Enterprise', alias_label: 'learner@example.org' }
    const created = await post('/users/alias/new', { user_aliases: [alias] })
    expect(created.status).toBe(201)
    // Not waited for: the attributes object (update-only by default for an alias) must find the user.
    await apply('/users/track', { attributes: [{ user_alias: alias, email: 'learner@example.org', is_enterprise_learner: 'true' }] })
    await env.waitForRequest(ws.key, created.headers.get('x-request-id')!)
    const { users } = await read({ email_address: 'learner@example.org' })
    expect(users).toHaveLength(1)
    expect(users[0]).toMatchObject({ user_aliases: [alias], email: 'learner@example.org', custom_attributes: { is_enterprise_learner: 'true' } })
  })

  it('leaves an alias another user holds where it is, and reports an unknown external id', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'u1' }, { external_id: 'u2' }] })
    await apply('/users/alias/new', { user_aliases: [{ external_id: 'u1', alias_name: 'shared', alias_label: 'l' }] })
    const { progress } = await apply('/users/alias/new', {
      user_aliases: [
        { external_id: 'u2', alias_name: 'shared', alias_label: 'l' },
        { external_id: 'nobody', alias_name: 'x', alias_label: 'l' },
      ],
    })
    expect(progress.errors).toEqual([
      { type: 'user_not_found', input_array: 'user_aliases', index: 1, message: 'no user found for external_id nobody; the alias was not added' },
    ])
    expect((await read({ user_aliases: [{ alias_name: 'shared', alias_label: 'l' }] })).users[0].external_id).toBe('u1')
    expect((await read({ user_aliases: [{ alias_name: 'x', alias_label: 'l' }] })).users).toEqual([])
  })

  it('refuses a bad body naming the field, 51 aliases, and a key without users.alias.new', async () => {
    expect((await post('/users/alias/new', { user_aliases: [] })).body.message).toBe('user_aliases: must hold at least one new user alias object')
    const many = Array.from({ length: 51 }, (_, i) => ({ alias_name: `n${i}`, alias_label: 'l' }))
    const r = await post('/users/alias/new', { user_aliases: many })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('user_aliases: must hold at most 50 new user alias objects per request')
    expect((await post('/users/alias/new', { user_aliases: [{ alias_name: 'n' }] })).status).toBe(400)
    const other = await env.workspace(['users.track'])
    expect((await post('/users/alias/new', { user_aliases: [{ alias_name: 'n', alias_label: 'l' }] }, other.key)).status).toBe(403)
  })

  it('applies once for a repeated Idempotency-Key', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'u1' }] })
    const body = { user_aliases: [{ external_id: 'u1', alias_name: 'once', alias_label: 'l' }] }
    const headers = { 'idempotency-key': 'alias-once' }
    const first = await env.call('POST', '/users/alias/new', { key: ws.key, body, headers })
    const again = await env.call('POST', '/users/alias/new', { key: ws.key, body, headers })
    expect(again.headers.get('x-request-id')).toBe(first.headers.get('x-request-id'))
    await env.waitForRequest(ws.key, first.headers.get('x-request-id')!)
    const { rows } = await env.ctx.pg.query('SELECT count(*)::int AS n FROM profile_aliases WHERE workspace_id = $1', [ws.id])
    expect(rows[0].n).toBe(1)
  })
})

describe('POST /users/alias/update', () => {
  it('renames an alias under its label, keeping its user', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'u1' }] })
    await apply('/users/alias/new', { user_aliases: [{ external_id: 'u1', alias_name: 'old', alias_label: 'crm' }] })
    const { response, progress } = await apply('/users/alias/update', {
      alias_updates: [{ alias_label: 'crm', old_alias_name: 'old', new_alias_name: 'new' }],
    })
    expect(response).toEqual({ aliases_processed: 1, message: 'success' })
    expect(progress.errors).toBeUndefined()
    expect((await read({ user_aliases: [{ alias_name: 'new', alias_label: 'crm' }] })).users[0].external_id).toBe('u1')
    expect((await read({ user_aliases: [{ alias_name: 'old', alias_label: 'crm' }] })).users).toEqual([])
    // Track work naming the new alias reaches the same user.
    await apply('/users/track', { attributes: [{ user_alias: { alias_name: 'new', alias_label: 'crm' }, plan: 'gold' }] })
    expect((await read({ external_ids: ['u1'] })).users[0].custom_attributes).toEqual({ plan: 'gold' })
  })

  it('reports an unknown alias and a taken name, changing nothing', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'u1' }] })
    await apply('/users/alias/new', {
      user_aliases: [
        { external_id: 'u1', alias_name: 'a', alias_label: 'l' },
        { external_id: 'u1', alias_name: 'b', alias_label: 'l' },
      ],
    })
    const { progress } = await apply('/users/alias/update', {
      alias_updates: [
        { alias_label: 'l', old_alias_name: 'missing', new_alias_name: 'c' },
        { alias_label: 'l', old_alias_name: 'a', new_alias_name: 'b' },
      ],
    })
    expect(progress.errors?.map((e: any) => [e.type, e.index])).toEqual([
      ['user_not_found', 0],
      ['alias_taken', 1],
    ])
    const aliases = (await read({ external_ids: ['u1'] })).users[0].user_aliases
    expect(aliases).toEqual([
      { alias_name: 'a', alias_label: 'l' },
      { alias_name: 'b', alias_label: 'l' },
    ])
  })

  it('refuses the same old and new name', async () => {
    const r = await post('/users/alias/update', { alias_updates: [{ alias_label: 'l', old_alias_name: 'a', new_alias_name: 'a' }] })
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('alias_updates.0.new_alias_name: must differ from old_alias_name')
  })
})
