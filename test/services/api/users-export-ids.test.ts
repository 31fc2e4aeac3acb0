import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
})
afterAll(async () => {
  await env.close()
})
beforeEach(async () => {
  ws = await env.workspace()
})

const exportIds = (body: unknown) => env.call('POST', '/users/export/ids', { key: ws.key, body })

describe('POST /users/export/ids by every identifier kind of the reference', () => {
  it('finds a user by braze_id (its service_id) and by a push token device_id', async () => {
    await env.writeAndWait(ws.key, '/users/track', {
      attributes: [
        { external_id: 'd1', first_name: 'Dee', push_tokens: [{ app_id: 'app', token: 'tok-1', device_id: 'dev-1' }] },
        { external_id: 'd2', push_tokens: [{ app_id: 'app', token: 'tok-2', device_id: 'dev-2' }] },
      ],
    })
    const [d1] = (await env.readUsers(ws.key, { external_ids: ['d1'] })).users
    const byBrazeId = await exportIds({ braze_id: d1.service_id })
    expect(byBrazeId.status, byBrazeId.text).toBe(201)
    expect(byBrazeId.body.users).toEqual([d1])
    // A field asked as braze_id is shown by that name, as clients of the reference read it.
    const byDevice = await exportIds({ device_id: 'dev-1', fields_to_export: ['external_id', 'braze_id', 'first_name'] })
    expect(byDevice.body).toEqual({ message: 'success', users: [{ external_id: 'd1', braze_id: d1.service_id, first_name: 'Dee' }] })
    const both = await exportIds({ device_id: 'dev-1', fields_to_export: ['service_id', 'braze_id'] })
    expect(both.body.users).toEqual([{ service_id: d1.service_id, braze_id: d1.service_id }])
    const unknown = await exportIds({ device_id: 'dev-x', braze_id: 'nope' })
    expect(unknown.body).toEqual({ message: 'success', users: [], invalid_user_ids: ['nope', 'dev-x'] })
  })

  it('names every kind in its refusal of an empty request', async () => {
    const r = await exportIds({})
    expect(r.status).toBe(400)
    expect(r.body.message).toBe('name at least one user: external_ids, user_aliases, service_id (braze_id), device_id, email_address or phone')
  })
})
