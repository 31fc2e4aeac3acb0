import { renameSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { localServer } from '../helpers/ports.js'
import { caller, expectStatus, servedRoutes, untouchedRoutes, waitDone, type Call } from '../helpers/route-tour.js'
import { startMakeRun, type ServiceProcesses } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'
import { unzip } from '../helpers/zip.js'

/**
 * The service as `make run` starts it (`npm start`: the supervisor, one API process, one worker
 * process holding the embedded ClickHouse), driven over HTTP through every route: a success and a
 * refusal each. The last test reads the API's own metrics and fails for any route left out.
 */
let svc: ServiceProcesses
let call: Call
let key: string
let admin: string
let ws: string
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User'

beforeAll(async () => {
  svc = await startMakeRun()
  call = caller(svc.apis[0])
  key = svc.credentials.api_key
  admin = svc.adminToken
  ws = svc.credentials.workspace_id
}, 120_000)

afterAll(async () => {
  await svc?.stop()
})

const asKey = (method: string, path: string, body?: unknown) => call(method, path, { token: key, body })
const asAdmin = (method: string, path: string, body?: unknown) => call(method, path, { token: admin, body })

describe("make run's layout (API and worker processes)", () => {
  let segmentId: string

  it('tracks users and answers their segment size from the worker holding ClickHouse', async () => {
    const seg = expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/segments`, { name: 'cohort a', filter: { custom_attribute: 'cohort', op: 'eq', value: 'a' } }), 201)
    segmentId = seg.body.segment_id
    expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/segments`, { name: 'bad', filter: { custom_attribute: 'cohort', op: 'nope' } }), 400)
    expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/${segmentId}`), 200)

    // Yesterday: inside the 90 days a read-back shows.
    const at = new Date(Date.now() - 86_400_000).toISOString()
    const track = expectStatus(
      await asKey('POST', '/users/track', {
        attributes: ['u1', 'u2', 'u3'].map((id) => ({ external_id: id, cohort: 'a', email: `${id}@example.com` })),
        events: [{ external_id: 'u1', name: 'signed_up', time: at }],
        purchases: [{ external_id: 'u2', product_id: 'p1', currency: 'USD', price: 9.5, time: at }],
      }),
      201,
    )
    const bad = expectStatus(await asKey('POST', '/users/track', { events: [{ external_id: 'u1', time: '2026-11-20T10:00:00Z' }] }), 400)
    expect(bad.body.message).toMatch(/name/)
    await waitDone(call, key, track)
    expectStatus(await asKey('GET', '/requests/no-such-request'), 404)

    const size = expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/${segmentId}`), 200)
    expect(size.body).toMatchObject({ segment_id: segmentId, size: 3 })
    expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/00000000-0000-0000-0000-000000000000`), 404)

    const read = expectStatus(await asKey('POST', '/users/export/ids', { external_ids: ['u1', 'u2'] }), 201)
    expect(read.body.users.map((u: { external_id: string }) => u.external_id).sort()).toEqual(['u1', 'u2'])
    const u1 = read.body.users.find((u: { external_id: string }) => u.external_id === 'u1')
    expect(u1.custom_attributes).toMatchObject({ cohort: 'a' })
    // The summaries come from the event history, which the API asks of the worker holding ClickHouse.
    expect(u1.custom_events).toEqual([{ name: 'signed_up', first: at, last: at, count: 1 }])
    expect(read.body.users.find((u: { external_id: string }) => u.external_id === 'u2').purchases).toEqual([{ name: 'p1', first: at, last: at, count: 1 }])
    expectStatus(await asKey('POST', '/users/export/ids', { external_ids: 'u1' }), 400)
  })

  it('reports ClickHouse ready through its holder, and its health', async () => {
    // Anyone learns the status; only the operator which process holds the engine, on which host.
    expect(expectStatus(await call('GET', '/readyz'), 200).body).toEqual({ status: 'ready' })
    const r = expectStatus(await asAdmin('GET', '/readyz'), 200)
    expect(r.body.checks.clickhouse).toMatch(/^ok \(embedded engine held by worker process \d+/)
    expect(r.body.checks).toMatchObject({ postgres: 'ok', redis: 'ok' })
    expectStatus(await call('GET', '/healthz'), 200)
  })

  it('exports a segment through the export worker, calls back and serves the file', async () => {
    const callbacks: unknown[] = []
    const hook = await localServer((req, res) => {
      let body = ''
      req.on('data', (d) => (body += d)).on('end', () => {
        callbacks.push(JSON.parse(body))
        res.end('ok')
      })
    })
    try {
      const exp = expectStatus(
        await asKey('POST', '/users/export/segment', { segment_id: segmentId, fields_to_export: ['external_id', 'custom_attributes'], callback_endpoint: `${hook.url}/done` }),
        201,
      )
      expectStatus(await asKey('POST', '/users/export/segment', { segment_id: '00000000-0000-0000-0000-000000000000', fields_to_export: ['external_id'] }), 404)
      await until('the export callback', () => callbacks.length, (n) => n > 0, 60_000, 100)
      expect(callbacks[0]).toMatchObject({ success: true, url: exp.body.url })

      const url = new URL(exp.body.url)
      const zip = await fetch(url)
      expect(zip.status).toBe(200)
      const lines = [...(await unzip(Buffer.from(await zip.arrayBuffer()))).values()].flatMap((text) => text.trim().split('\n'))
      expect(lines.map((l) => JSON.parse(l).external_id).sort()).toEqual(['u1', 'u2', 'u3'])
      expectStatus(await call('GET', `${url.pathname}?signature=forged`), 403)
      // An API process whose DATA_DIR lacks the worker's files (another host) says so, never a broken ZIP.
      const files = path.join(svc.dataDir, 'exports', ...exp.body.object_prefix.split('/'))
      renameSync(files, `${files}.elsewhere`)
      const away = expectStatus(await call('GET', `${url.pathname}${url.search}`), 503)
      expect(away.body.message).toMatch(/is not in this API process's DATA_DIR/)
      renameSync(`${files}.elsewhere`, files)

      const status = expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/exports/${exp.body.export_id}`), 200)
      expect(status.body).toMatchObject({ status: 'done', users_exported: 3 })
      expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/exports/00000000-0000-0000-0000-000000000000`), 404)

      expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/global_control_group`, { percent: 100 }), 200)
      expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/global_control_group`, { percent: 101 }), 400)
      const gcg = expectStatus(await asKey('POST', '/users/export/global_control_group', { fields_to_export: ['external_id'] }), 201)
      expect(gcg.body.url).toMatch(/\/download\?signature=/)
      expectStatus(await asKey('POST', '/users/export/global_control_group', {}), 400)
    } finally {
      await hook.close()
    }
  })

  it('merges, identifies and deletes users through the identity worker', async () => {
    const merge = expectStatus(
      await asKey('POST', '/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'u3' }, identifier_to_keep: { external_id: 'u2' } }] }),
      202,
    )
    expectStatus(await asKey('POST', '/users/merge', { merge_updates: [{ identifier_to_merge: { external_id: 'u3' } }] }), 400)
    await waitDone(call, key, merge)
    const alias = { alias_name: 'anon-1', alias_label: 'device' }
    await waitDone(call, key, expectStatus(await asKey('POST', '/users/track', { attributes: [{ user_alias: alias, cohort: 'b', _update_existing_only: false }] }), 201))
    const identify = expectStatus(await asKey('POST', '/users/identify', { aliases_to_identify: [{ external_id: 'u4', user_alias: alias }] }), 201)
    expectStatus(await asKey('POST', '/users/identify', { aliases_to_identify: [{ external_id: 'u4' }] }), 400)
    await waitDone(call, key, identify)
    const del = expectStatus(await asKey('POST', '/users/delete', { external_ids: ['u1'] }), 201)
    expectStatus(await asKey('POST', '/users/delete', {}), 400)
    await waitDone(call, key, del)

    const read = expectStatus(await asKey('POST', '/users/export/ids', { external_ids: ['u1', 'u2', 'u3', 'u4'] }), 201)
    const ids = read.body.users.map((u: { external_id: string }) => u.external_id).sort()
    expect(ids).toEqual(['u2', 'u4'])
    const size = expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/${segmentId}`), 200)
    expect(size.body.size).toBe(1)
  })

  it('sets and reads subscription states', async () => {
    const group = expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/subscription_groups`, { name: 'news', channel: 'email' }), 201)
    expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/subscription_groups`, { name: 'news', channel: 'email' }), 409)
    const gid = group.body.subscription_group_id
    await waitDone(call, key, expectStatus(await asKey('POST', '/subscription/status/set', { subscription_group_id: gid, subscription_state: 'subscribed', external_id: ['u2'] }), 201))
    expectStatus(await asKey('POST', '/subscription/status/set', { subscription_group_id: gid, subscription_state: 'maybe', external_id: ['u2'] }), 400)
    await waitDone(
      call,
      key,
      expectStatus(await asKey('POST', '/v2/subscription/status/set', { subscription_groups: [{ subscription_group_id: gid, subscription_state: 'subscribed', external_ids: ['u4'] }] }), 201),
    )
    expectStatus(await asKey('POST', '/v2/subscription/status/set', { subscription_groups: 'all' }), 400)
    const got = expectStatus(await asKey('GET', `/subscription/status/get?subscription_group_id=${gid}&external_id[]=u2&external_id[]=u4&external_id[]=nobody`), 200)
    expect(got.body.status).toEqual({ u2: 'Subscribed', u4: 'Subscribed', nobody: 'Unknown' })
    expectStatus(await asKey('GET', `/subscription/status/get?subscription_group_id=${gid}`), 400)
  })

  it('manages email states and the spam and bounce lists', async () => {
    expectStatus(await asKey('POST', '/email/status', { email: 'u2@example.com', subscription_state: 'opted_in' }), 201)
    expectStatus(await asKey('POST', '/email/status', { email: 'u2@example.com', subscription_state: 'sometimes' }), 400)
    for (const list of ['email_spam_list', 'email_bounce_list']) {
      expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/${list}`, { emails: ['x@example.com'] }), 200)
      expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${ws}/${list}`, { emails: [] }), 400)
      const listed = expectStatus(await asAdmin('GET', `/admin/v1/workspaces/${ws}/${list}`), 200)
      expect(JSON.stringify(listed.body)).toContain('x@example.com')
      expectStatus(await asAdmin('GET', `/admin/v1/workspaces/no-such-workspace/${list}`), 404)
    }
    const spam = expectStatus(await asKey('POST', '/email/spam/remove', { email: ['x@example.com'] }), 201)
    expect(spam.body).toMatchObject({ message: 'success' })
    expectStatus(await asKey('POST', '/email/spam/remove', {}), 400)
    expectStatus(await asKey('POST', '/email/bounce/remove', { email: 'x@example.com' }), 201)
    expectStatus(await asKey('POST', '/email/bounce/remove', { email: 'not an address' }), 400)
  })

  it('migrates identities, tracks synchronously and lists email states through the workers', async () => {
    const track = expectStatus(await asKey('POST', '/users/track', { attributes: [{ external_id: 'm1', email: 'm1@example.com', plan: 'free' }] }), 201)
    await waitDone(call, key, track)
    const alias = expectStatus(await asKey('POST', '/users/alias/new', { user_aliases: [{ external_id: 'm1', alias_name: 'crm-1', alias_label: 'crm' }, { alias_name: 'anon-m', alias_label: 'device' }] }), 201)
    expectStatus(await asKey('POST', '/users/alias/new', { user_aliases: [] }), 400)
    await waitDone(call, key, alias)
    const update = expectStatus(await asKey('POST', '/users/alias/update', { alias_updates: [{ alias_label: 'crm', old_alias_name: 'crm-1', new_alias_name: 'crm-2' }] }), 201)
    expectStatus(await asKey('POST', '/users/alias/update', { alias_updates: [{ alias_label: 'crm' }] }), 400)
    await waitDone(call, key, update)

    // Answered once the identity worker applied it.
    const rename = expectStatus(await asKey('POST', '/users/external_ids/rename', { external_id_renames: [{ current_external_id: 'm1', new_external_id: 'm1-new' }] }), 201)
    expect(rename.body).toEqual({ message: 'success', external_ids: ['m1'], rename_errors: [] })
    expectStatus(await asKey('POST', '/users/external_ids/rename', { external_id_renames: [] }), 400)
    // The deprecated id still names the user, on the track path too.
    const sync = expectStatus(await asKey('POST', '/users/track/sync', { attributes: { external_id: 'm1', plan: 'pro' } }), 201)
    expect(sync.body).toEqual({ users: [{ external_id: 'm1', custom_attributes: { plan: 'pro' } }], message: 'success' })
    expectStatus(await asKey('POST', '/users/track/sync', { attributes: [{ external_id: 'a' }, { external_id: 'b' }] }), 400)
    const read = expectStatus(await asKey('POST', '/users/export/ids', { external_ids: ['m1-new'] }), 201)
    expect(read.body.users[0]).toMatchObject({ external_id: 'm1-new', custom_attributes: { plan: 'pro' }, user_aliases: [{ alias_name: 'crm-2', alias_label: 'crm' }] })
    const byBrazeId = expectStatus(await asKey('POST', '/users/export/ids', { braze_id: read.body.users[0].service_id, fields_to_export: ['external_id', 'braze_id'] }), 201)
    expect(byBrazeId.body.users).toEqual([{ external_id: 'm1-new', braze_id: read.body.users[0].service_id }])
    const removed = expectStatus(await asKey('POST', '/users/external_ids/remove', { external_ids: ['m1'] }), 201)
    expect(removed.body).toEqual({ message: 'success', removed_ids: ['m1'], removal_errors: [] })
    expectStatus(await asKey('POST', '/users/external_ids/remove', { external_ids: 'm1' }), 400)

    const status = expectStatus(await asKey('GET', '/subscription/user/status?external_id=m1-new'), 200)
    expect(status.body).toMatchObject({ users: [{ external_id: 'm1-new', email: 'm1@example.com', subscription_groups: [] }], total_count: 1 })
    expectStatus(await asKey('GET', '/subscription/user/status?limit=1'), 400)

    const block = expectStatus(await asKey('POST', '/email/blocklist', { email: 'm1@example.com' }), 201)
    expectStatus(await asKey('POST', '/email/blocklist', { email: 'nope' }), 400)
    await waitDone(call, key, block)
    await waitDone(call, key, expectStatus(await asKey('POST', '/email/blacklist', { email: ['m2@example.com'] }), 201))
    expectStatus(await asKey('POST', '/email/blacklist', {}), 400)
    const today = new Date().toISOString().slice(0, 10)
    const bounces = expectStatus(await asKey('GET', `/email/hard_bounces?start_date=${today}&end_date=${today}`), 200)
    expect(bounces.body.emails.map((e: { email: string }) => e.email).sort()).toEqual(['m1@example.com', 'm2@example.com'])
    expectStatus(await asKey('GET', '/email/hard_bounces?start_date=soon'), 400)
    const unsubscribed = expectStatus(await asKey('GET', '/email/unsubscribes?email=m1@example.com'), 200)
    expect(unsubscribed.body.emails.map((e: { email: string }) => e.email)).toEqual(['m1@example.com'])
    expectStatus(await asKey('GET', '/email/unsubscribes?sort_direction=sideways&email=m1@example.com'), 400)
    const user = expectStatus(await asKey('POST', '/users/export/ids', { email_address: 'm1@example.com', fields_to_export: ['email_subscribe'] }), 201)
    expect(user.body.users).toEqual([{ email_subscribe: 'unsubscribed' }])
  })

  it('runs the operator API: workspaces, keys, SCIM tokens and settings', async () => {
    const other = expectStatus(await asAdmin('POST', '/admin/v1/workspaces', { name: 'second' }), 201)
    expectStatus(await asAdmin('POST', '/admin/v1/workspaces', {}), 400)
    const k = expectStatus(await asAdmin('POST', `/admin/v1/workspaces/${other.body.id}/api_keys`, { name: 'k', permissions: ['users.track'] }), 201)
    expectStatus(await asAdmin('POST', '/admin/v1/workspaces/00000000-0000-0000-0000-000000000000/api_keys', { name: 'k', permissions: ['users.track'] }), 404)
    expectStatus(await asAdmin('PUT', `/admin/v1/api_keys/${k.body.id}/permissions`, { permissions: ['users.export.ids'] }), 200)
    expectStatus(await asAdmin('PUT', `/admin/v1/api_keys/${k.body.id}/permissions`, { permissions: ['everything'] }), 400)
    // The key's new permission holds for the very next request.
    expectStatus(await call('POST', '/users/track', { token: k.body.key, body: { attributes: [{ external_id: 'z', a: 1 }] } }), 403)
    expectStatus(await asAdmin('DELETE', `/admin/v1/api_keys/${k.body.id}`), 204)
    expectStatus(await asAdmin('DELETE', `/admin/v1/api_keys/${k.body.id}`), 404)
    expectStatus(await call('POST', '/users/export/ids', { token: k.body.key, body: { external_ids: ['z'] } }), 401)

    const t = expectStatus(await asAdmin('POST', '/admin/v1/scim_tokens', { request_origin: 'idp.example' }), 201)
    expectStatus(await asAdmin('POST', '/admin/v1/scim_tokens', { request_origin: '' }), 400)
    expectStatus(await asAdmin('DELETE', `/admin/v1/scim_tokens/${t.body.id}`), 204)
    expectStatus(await asAdmin('DELETE', `/admin/v1/scim_tokens/${t.body.id}`), 404)

    expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/export_storage`, { bucket: 'bucket-a', region: 'us-east-1', access_key_id: 'a', secret_access_key: 'b' }), 200)
    expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/export_storage`, { bucket: 'B!', region: 'us-east-1', access_key_id: 'a', secret_access_key: 'b' }), 400)
    expectStatus(await asAdmin('DELETE', `/admin/v1/workspaces/${ws}/export_storage`), 204)
    expectStatus(await asAdmin('DELETE', '/admin/v1/workspaces/00000000-0000-0000-0000-000000000000/export_storage'), 404)
    const limits = expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/rate_limits`, { default_per_hour: 100_000 }), 200)
    expect(limits.body.default_per_hour).toBe(100_000)
    expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/rate_limits`, { default_per_hour: -1 }), 400)
    expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/blocked_external_ids`, { external_ids: ['blocked-1'] }), 200)
    expectStatus(await asAdmin('PUT', `/admin/v1/workspaces/${ws}/blocked_external_ids`, { external_ids: [''] }), 400)
    // The track partitions: the count in force (4), set again to itself (no change), and refused out of range.
    expect(expectStatus(await asAdmin('GET', '/admin/v1/track_partitions'), 200).body).toMatchObject({ partitions: 4, changing: null })
    expect(expectStatus(await asAdmin('PUT', '/admin/v1/track_partitions', { partitions: 4 }), 200).body).toMatchObject({ partitions: 4, generation: 0 })
    expectStatus(await asAdmin('PUT', '/admin/v1/track_partitions', { partitions: 0 }), 400)
    expectStatus(await call('GET', '/admin/v1/track_partitions', { token: 'wrong-token-wrong-token' }), 401)
    const blocked = await asKey('POST', '/users/track', { attributes: [{ external_id: 'blocked-1', a: 1 }] })
    expect(blocked.status).toBeGreaterThanOrEqual(400)
    expect(blocked.status).toBeLessThan(500)
    expectStatus(await call('POST', '/admin/v1/workspaces', { token: 'wrong-token-wrong-token', body: { name: 'x' } }), 401)
  })

  it('provisions dashboard users over SCIM', async () => {
    const origin = { 'x-request-origin': svc.credentials.scim_request_origin }
    const scim = (method: string, path: string, body?: unknown, headers: Record<string, string> = origin) =>
      call(method, path, { token: svc.credentials.scim_token, body, headers: { ...headers, ...(body ? { 'content-type': 'application/scim+json' } : {}) } })
    const user = {
      schemas: [USER_SCHEMA],
      userName: 'ada@example.com',
      name: { givenName: 'Ada', familyName: 'Lovelace' },
      department: 'engineering',
      permissions: { companyPermissions: ['manage_company_settings'], appGroup: [] },
    }
    const created = expectStatus(await scim('POST', '/scim/v2/Users', user), 201)
    expectStatus(await scim('POST', '/scim/v2/Users', { ...user, userName: undefined }), 400)
    const found = expectStatus(await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "ada@example.com"')}`), 200)
    expect(found.body.totalResults).toBe(1)
    expectStatus(await scim('GET', '/scim/v2/Users', undefined, {}), 401)
    expectStatus(await scim('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq')}`), 400)
    expectStatus(await scim('GET', `/scim/v2/Users/${created.body.id}`), 200)
    expectStatus(await scim('GET', '/scim/v2/Users/no-such-user'), 404)
    const put = expectStatus(await scim('PUT', `/scim/v2/Users/${created.body.id}`, { ...user, department: 'marketing' }), 200)
    expect(put.body.department).toBe('marketing')
    expectStatus(await scim('PUT', '/scim/v2/Users/no-such-user', user), 404)
    const patch = await scim('PATCH', `/scim/v2/Users/${created.body.id}`, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'replace', path: 'department', value: 'finance' }],
    })
    expect(expectStatus(patch, 200).body.department).toBe('finance')
    expectStatus(await scim('PATCH', '/scim/v2/Users/no-such-user', { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: [] }, {}), 401)
    expectStatus(await scim('PATCH', `/scim/v2/Users/${created.body.id}`, { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: [{ op: 'replace', path: 'userName', value: 'eve@example.com' }] }), 400)
    const searched = expectStatus(
      await scim('POST', '/scim/v2/Users/.search', { schemas: ['urn:ietf:params:scim:api:messages:2.0:SearchRequest'], filter: 'department eq "finance"' }),
      200,
    )
    expect(searched.body.Resources.map((u: { id: string }) => u.id)).toEqual([created.body.id])
    expectStatus(await scim('POST', '/scim/v2/Users/.search', { filter: 'department eq "finance"' }), 400)
    for (const path of ['/scim/v2/ServiceProviderConfig', '/scim/v2/ResourceTypes', '/scim/v2/Schemas', '/scim/v2/ResourceTypes/User', `/scim/v2/Schemas/${USER_SCHEMA}`]) {
      expectStatus(await scim('GET', path), 200)
      expectStatus(await scim('GET', path, undefined, {}), 401)
    }
    const filterQuery = `?filter=${encodeURIComponent('id eq "User"')}`
    expectStatus(await scim('GET', `/scim/v2/ServiceProviderConfig${filterQuery}`), 403)
    expectStatus(await scim('GET', `/scim/v2/ResourceTypes${filterQuery}`), 400)
    expectStatus(await scim('GET', `/scim/v2/Schemas${filterQuery}`), 400)
    expectStatus(await scim('GET', '/scim/v2/ResourceTypes/Group'), 404)
    expectStatus(await scim('GET', '/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group'), 404)
    expectStatus(await scim('DELETE', `/scim/v2/Users/${created.body.id}`), 204)
    expectStatus(await scim('DELETE', `/scim/v2/Users/${created.body.id}`), 404)
  })

  it('serves its documents, metrics and queue dashboard', async () => {
    const doc = expectStatus(await call('GET', '/openapi.json'), 200)
    expect(doc.body.openapi).toBe('3.1.0')
    expectStatus(await call('GET', '/docs'), 200)
    expectStatus(await call('GET', '/metrics'), 401)
    expect(expectStatus(await asAdmin('GET', '/metrics'), 200).text).toContain('uds_http_requests_total')
    expectStatus(await call('GET', '/admin/queues/backlog'), 401)
    const backlog = expectStatus(await asAdmin('GET', '/admin/queues/backlog'), 200)
    expect(backlog.body).toBeTypeOf('object')
  })

  it('answers 503 with Retry-After, never null, while the worker holding ClickHouse is stopped', async () => {
    svc.signal('worker', 'SIGSTOP')
    try {
      const r = await asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/${segmentId}`)
      expectStatus(r, 503)
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/)
      expect(r.body.message).toMatch(/ClickHouse is unavailable: the worker process holding the embedded engine \(pid \d+.*did not answer within \d+ s/)
      expect(expectStatus(await call('GET', '/readyz'), 503).body).toEqual({ status: 'not ready' })
      const ready = expectStatus(await asAdmin('GET', '/readyz'), 503)
      expect(ready.body.checks.clickhouse).toMatch(/did not answer|no worker process holds/)
    } finally {
      svc.signal('worker', 'SIGCONT')
    }
    const back = await until(
      'the segment size again',
      () => asAdmin('GET', `/admin/v1/workspaces/${ws}/segments/${segmentId}`),
      (r) => r.status === 200,
      30_000,
      200,
    )
    expect(back.body.size).toBe(1)
  })

  it('has called every mounted route with a success and, where callers can be refused, a refusal', async () => {
    expect(untouchedRoutes(await servedRoutes(call, admin))).toEqual([])
  })
})
