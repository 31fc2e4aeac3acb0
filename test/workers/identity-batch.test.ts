import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countEvents } from '../../shared/clickhouse/event-repository.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  // No identity worker yet: the first workspace's identity requests wait as a backlog, applied in batches.
  env = await startTestEnv({ workers: ['track'] })
})
afterAll(async () => {
  await env.close()
})

const t = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString()
const alias = (alias_name: string) => ({ alias_name, alias_label: 'crm' })
const external = (external_id: string) => ({ external_id })

/** The same users in every workspace: external ids, alias-only users, two alias-only users sharing an email, group states. */
async function setUp(key: string, groupId: string): Promise<void> {
  const write = (body: unknown) => env.writeAndWait(key, '/users/track', body)
  const sub = (state: string) => [{ subscription_group_id: groupId, subscription_state: state }]
  await write({
    attributes: [
      { external_id: 'e1', first_name: 'One', plan: 'gold' },
      { external_id: 'e2', last_name: 'Two', subscription_groups: sub('subscribed') },
      { external_id: 'e3', country: 'FR' },
      { external_id: 'e4', plan: 'free', tier: 4 },
      { external_id: 'e5', first_name: 'Five' },
      { external_id: 'e6', home_city: 'Lyon', push_tokens: [{ app_id: 'app', token: 'tk-6' }] },
      { user_alias: alias('al1'), _update_existing_only: false, first_name: 'Anon', subscription_groups: sub('unsubscribed') },
      { user_alias: alias('al2'), _update_existing_only: false, language: 'de' },
    ],
    events: ['e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e6'].map((u, i) => ({ external_id: u, name: 'played', time: t(i) })),
    purchases: [{ user_alias: alias('al1'), product_id: 'sku', currency: 'USD', price: 3, time: t(9) }],
  })
  // One after the other, so their update times differ: `most_recently_updated` tells them apart.
  await write({ attributes: [{ user_alias: alias('dupA'), _update_existing_only: false, email: 'dup@example.com', gender: 'F' }] })
  await write({ attributes: [{ user_alias: alias('dupB'), _update_existing_only: false, email: 'dup@example.com', dob: '1990-01-01' }] })
  await write({ events: [{ user_alias: alias('al2'), name: 'opened', time: t(20) }] })
}

/** Identity requests that depend on each other's order: an id given then used, chains, a delete then a merge of the deleted user. */
const requests: [string, unknown][] = [
  ['/users/identify', { aliases_to_identify: [{ external_id: 'n1', user_alias: alias('al1') }] }],
  ['/users/merge', { merge_updates: [{ identifier_to_merge: external('n1'), identifier_to_keep: external('e1') }] }],
  ['/users/merge', { merge_updates: [{ identifier_to_merge: external('e1'), identifier_to_keep: external('e2') }] }],
  ['/users/identify', { emails_to_identify: [{ external_id: 'e3', email: 'dup@example.com', prioritization: ['unidentified', 'most_recently_updated'] }] }],
  ['/users/merge', { merge_updates: [{ identifier_to_merge: { email: 'dup@example.com', prioritization: ['unidentified'] }, identifier_to_keep: external('e4') }] }],
  ['/users/delete', { external_ids: ['e5'] }],
  [
    '/users/merge',
    {
      merge_updates: [
        { identifier_to_merge: external('e5'), identifier_to_keep: external('e6') },
        { identifier_to_merge: external('e6'), identifier_to_keep: external('e2') },
        { identifier_to_merge: external('e2'), identifier_to_keep: external('e2') },
      ],
    },
  ],
  ['/users/identify', { aliases_to_identify: [{ external_id: 'e2', user_alias: alias('al1') }, { external_id: 'e9', user_alias: alias('al1') }] }],
  ['/users/merge', { merge_updates: [{ identifier_to_merge: external('e4'), identifier_to_keep: external('e2') }] }],
  ['/users/identify', { aliases_to_identify: [{ external_id: 'e2', user_alias: alias('al2') }, { external_id: 'e9', user_alias: alias('fresh') }] }],
  ['/users/delete', { external_ids: ['e3'] }],
]

/** Every user the workspace still has, as /users/export/ids shows them, without per-profile random parts (its group id named G); and event counts by external id. */
async function stateOf(w: { id: string; key: string }, groupId: string) {
  const ids = ['e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e9', 'n1']
  const { users } = await env.readUsers(w.key, { external_ids: ids })
  const aliases = await Promise.all(['al1', 'al2', 'dupA', 'dupB', 'fresh'].map(async (a) => (await env.readUsers(w.key, { user_aliases: [alias(a)] })).users))
  const profiles = await env.ctx.pg.query<{ id: number; external_id: string | null }>('SELECT id, external_id FROM profiles WHERE workspace_id = $1', [w.id])
  const events = Object.fromEntries(
    await Promise.all(profiles.rows.map(async (p) => [p.external_id ?? `#${p.id}`, await countEvents(env.clickhouse, w.id, [Number(p.id)])])),
  )
  const records = [...users, ...aliases.flat()]
    .map(({ service_id: _s, created_at: _c, random_bucket: _r, ...rest }) => JSON.parse(JSON.stringify(rest).replaceAll(groupId, 'G')))
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
  return { records, events, profiles: profiles.rowCount }
}

describe('batched apply of an identity backlog', () => {
  it('gives what applying each request alone gives, in acceptance order', async () => {
    const batched = await env.workspace()
    const alone = await env.workspace()
    const groups = await Promise.all(
      [batched, alone].map(async (w) => (await env.admin('POST', `/admin/v1/workspaces/${w.id}/subscription_groups`, { name: 'news', channel: 'email' })).body.subscription_group_id as string),
    )
    await setUp(batched.key, groups[0])
    await setUp(alone.key, groups[1])

    // Accepted while no identity worker runs, then drained in batches.
    const ids: string[] = []
    for (const [path, body] of requests) {
      const r = await env.call('POST', path, { key: batched.key, body })
      expect(r.status, r.text).toBeLessThan(300)
      ids.push(r.headers.get('x-request-id')!)
    }
    await env.startWorkers(['identity'])
    const batchedProgress = []
    for (const id of ids) batchedProgress.push(await env.waitForRequest(batched.key, id))
    const batches = await env.ctx.pg.query(`SELECT count(*)::int AS n FROM applied_jobs WHERE workspace_id = $1 GROUP BY batch_key ORDER BY n DESC LIMIT 1`, [batched.id])
    expect(batches.rows[0].n).toBeGreaterThan(1)

    const aloneProgress = []
    for (const [path, body] of requests) aloneProgress.push((await env.writeAndWait(alone.key, path, body)).progress)

    const strip = (p: { errors?: unknown[] }[]) => p.map((x) => x.errors ?? [])
    expect(strip(batchedProgress)).toEqual(strip(aloneProgress))
    const errorTypes = strip(aloneProgress).map((errors) => (errors as { type: string }[]).map((e) => e.type))
    expect(errorTypes).toEqual([[], [], [], [], [], [], ['user_not_found', 'same_user'], ['already_identified'], [], ['user_not_found'], []])

    const [b, a] = [await stateOf(batched, groups[0]), await stateOf(alone, groups[1])]
    expect(b).toEqual(a)
    expect(a.profiles).toBe(1)
    const e2 = a.records.find((r) => r.external_id === 'e2')
    expect(e2).toMatchObject({
      first_name: 'One', last_name: 'Two', home_city: 'Lyon', language: 'de', gender: 'F', custom_attributes: { plan: 'gold', tier: 4 },
      user_aliases: [alias('al1'), alias('al2'), alias('dupA')],
      email: 'dup@example.com', subscription_groups: [{ subscription_group_id: 'G', subscription_state: 'subscribed' }],
    })
    expect(a.events.e2).toEqual([{ kind: 'event', n: 6 }, { kind: 'purchase', n: 1 }])
  })
})
