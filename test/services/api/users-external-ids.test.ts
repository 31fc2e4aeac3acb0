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
const rename = (...external_id_renames: { current_external_id: string; new_external_id: string }[]) =>
  post('/users/external_ids/rename', { external_id_renames })

async function profileIdOf(externalId: string): Promise<number> {
  const { rows } = await env.ctx.pg.query<{ id: string }>('SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, externalId])
  return Number(rows[0].id)
}

describe('POST /users/external_ids/rename', () => {
  it('renames, answers once applied, and the old id keeps naming the user until removed', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'old-1', first_name: 'Ann' }] })
    const r = await rename({ current_external_id: 'old-1', new_external_id: 'new-1' })
    expect(r.status, r.text).toBe(201)
    expect(r.body).toEqual({ message: 'success', external_ids: ['old-1'], rename_errors: [] })

    const [user] = (await read({ external_ids: ['new-1'] })).users
    expect(user).toMatchObject({ external_id: 'new-1', first_name: 'Ann' })
    // The deprecated id still reads and tracks the same user; no second profile appears.
    expect((await read({ external_ids: ['old-1'] })).users).toEqual([user])
    await apply('/users/track', {
      attributes: [{ external_id: 'old-1', last_name: 'Lee' }],
      events: [{ external_id: 'old-1', name: 'opened', time: new Date().toISOString() }],
    })
    const after = (await read({ external_ids: ['new-1'] })).users[0]
    expect(after).toMatchObject({ external_id: 'new-1', first_name: 'Ann', last_name: 'Lee' })
    expect(after.custom_events.map((e: any) => [e.name, e.count])).toEqual([['opened', 1]])
    const { rows } = await env.ctx.pg.query('SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1', [ws.id])
    expect(rows[0].n).toBe(1)

    // The exported snapshot carries the new id.
    const id = await profileIdOf('new-1')
    const snapshots = await until('snapshot with the new id', () => readSnapshots(env.clickhouse, ws.id, [id]), (s) => s.get(id)?.external_id === 'new-1')
    expect(snapshots.get(id)?.external_id).toBe('new-1')

    // Removed, the old id names nobody: a track for it creates a new user.
    const removed = await post('/users/external_ids/remove', { external_ids: ['old-1'] })
    expect(removed.status, removed.text).toBe(201)
    expect(removed.body).toEqual({ message: 'success', removed_ids: ['old-1'], removal_errors: [] })
    expect((await read({ external_ids: ['old-1'] })).users).toEqual([])
    await apply('/users/track', { attributes: [{ external_id: 'old-1', first_name: 'Other' }] })
    const [other] = (await read({ external_ids: ['old-1'] })).users
    expect(other.first_name).toBe('Other')
    expect(other.service_id).not.toBe(user.service_id)
  })

  it('refuses a deprecated current id, a taken new id and an unknown user, as rename_errors', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'a' }, { external_id: 'b' }] })
    expect((await rename({ current_external_id: 'a', new_external_id: 'a2' })).status).toBe(201)
    const r = await rename(
      { current_external_id: 'a', new_external_id: 'a3' },
      { current_external_id: 'b', new_external_id: 'a2' },
      { current_external_id: 'b', new_external_id: 'a' },
      { current_external_id: 'nobody', new_external_id: 'z' },
      { current_external_id: 'b', new_external_id: 'b2' },
    )
    expect(r.status).toBe(201)
    expect(r.body.external_ids).toEqual(['b'])
    expect(r.body.rename_errors.map(([i]: [number]) => i)).toEqual([0, 1, 2, 3])
    expect(r.body.rename_errors[0][1]).toBe('current_external_id a is a deprecated external id; rename the user\'s primary id a2')
    expect(r.body.rename_errors[1][1]).toBe('new_external_id a2 is already in use as a primary or deprecated external id')
    expect((await read({ external_ids: ['b2'] })).users).toHaveLength(1)
    expect((await read({ external_ids: ['a2'] })).users[0].external_id).toBe('a2')
  })

  it('sets and reads subscription states by a deprecated id', async () => {
    const group = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'news', channel: 'email' })
    const gid = group.body.subscription_group_id
    await apply('/users/track', { attributes: [{ external_id: 's-old' }] })
    await rename({ current_external_id: 's-old', new_external_id: 's-new' })
    await apply('/subscription/status/set', { subscription_group_id: gid, subscription_state: 'subscribed', external_id: ['s-old'] })
    expect((await read({ external_ids: ['s-new'] })).users[0].subscription_groups).toEqual([{ subscription_group_id: gid, subscription_state: 'subscribed' }])
    const got = await env.call('GET', `/subscription/status/get?subscription_group_id=${gid}&external_id[]=s-old&external_id[]=s-new`, { key: ws.key })
    expect(got.body.status).toEqual({ 's-old': 'Subscribed', 's-new': 'Subscribed' })
    const listed = await env.call('GET', '/subscription/user/status?external_id=s-old', { key: ws.key })
    expect(listed.body.users.map((u: any) => u.external_id)).toEqual(['s-new'])
  })

  it('moves deprecated ids with a merge, and deletes by a deprecated id', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'm' }, { external_id: 'k' }] })
    await rename({ current_external_id: 'm', new_external_id: 'm2' })
    await apply('/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'm' }, identifier_to_keep: { external_id: 'k' } }] })
    expect((await read({ external_ids: ['m'] })).users[0].external_id).toBe('k')
    await apply('/users/delete', { external_ids: ['m'] })
    expect((await read({ external_ids: ['k'] })).users).toEqual([])
  })

  it('validates the body, answers the reference limits, and needs its permission', async () => {
    expect((await post('/users/external_ids/rename', { external_id_renames: [] })).body.message).toBe(
      'external_id_renames: must hold at least one external ID rename object',
    )
    const many = Array.from({ length: 51 }, (_, i) => ({ current_external_id: `c${i}`, new_external_id: `n${i}` }))
    expect((await post('/users/external_ids/rename', { external_id_renames: many })).body.message).toBe(
      'external_id_renames: must hold at most 50 external ID rename objects per request',
    )
    const same = await rename({ current_external_id: 'x', new_external_id: 'x' })
    expect(same.status).toBe(400)
    expect(same.body.message).toBe('external_id_renames.0.new_external_id: must differ from current_external_id')
    const other = await env.workspace(['users.track'])
    expect((await post('/users/external_ids/rename', { external_id_renames: [{ current_external_id: 'a', new_external_id: 'b' }] }, other.key)).status).toBe(403)
    expect((await post('/users/external_ids/remove', { external_ids: ['a'] }, other.key)).status).toBe(403)
  })
})

describe('POST /users/external_ids/remove', () => {
  it('refuses a primary id and an unknown one, as removal_errors', async () => {
    await apply('/users/track', { attributes: [{ external_id: 'p' }] })
    const r = await post('/users/external_ids/remove', { external_ids: ['p', 'unknown', 'p'] })
    expect(r.status).toBe(201)
    expect(r.body.removed_ids).toEqual([])
    expect(r.body.removal_errors).toEqual([
      [0, 'p is a primary external id; only deprecated external ids can be removed'],
      [1, 'no user has the deprecated external id unknown'],
    ])
    expect((await read({ external_ids: ['p'] })).users).toHaveLength(1)
  })
})
