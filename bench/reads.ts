// Synchronous reads on the embedded service: /subscription/status/get and /users/export/ids,
// 10 users per request, 16 in flight, 10 s each. Prints one JSON line.
import { randomBytes } from 'node:crypto'
import { adminToken, credentials, dropQueueKeys, freshDatabase, percentile, startService, stopService, tempDir } from './lib.js'

const USERS = 5000
const SECONDS = 10
const CONCURRENCY = 16

async function main() {
  const dataDir = tempDir('uds-bench-reads-')
  const env = {
    DATABASE_URL: await freshDatabase('uds_bench_reads'),
    DATA_DIR: dataDir,
    QUEUE_PREFIX: `udsbench${randomBytes(3).toString('hex')}`,
  }
  const service = await startService([], env)
  const { api_key: key, workspace_id: ws } = credentials(dataDir)
  const admin = { authorization: `Bearer ${adminToken(dataDir)}`, 'content-type': 'application/json' }
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const api = service.url
  await fetch(`${api}/admin/v1/workspaces/${ws}/rate_limits`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ default_per_hour: 1e9, endpoints: { '/users/export/ids': { limit: 1e9, window_seconds: 1 }, '/subscription/status/set': { limit: 1e9, window_seconds: 1 } } }),
  })
  const group = (await (await fetch(`${api}/admin/v1/workspaces/${ws}/subscription_groups`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'news', channel: 'email' }) })).json()) as { subscription_group_id: string }

  const ids: string[] = []
  for (let i = 0; i < USERS; i += 75) {
    const attributes = Array.from({ length: Math.min(75, USERS - i) }, (_, j) => ({
      external_id: `r${i + j}`,
      email: `r${i + j}@example.com`,
      subscription_groups: [{ subscription_group_id: group.subscription_group_id, subscription_state: 'subscribed' }],
    }))
    const r = await fetch(`${api}/users/track`, { method: 'POST', headers: auth, body: JSON.stringify({ attributes }) })
    ids.push(r.headers.get('x-request-id')!)
  }
  for (const id of ids) {
    while (((await (await fetch(`${api}/requests/${id}`, { headers: auth })).json()) as { status: string }).status !== 'done') {
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  await new Promise((r) => setTimeout(r, 1100))

  const sample = () => Array.from({ length: 10 }, () => `r${Math.floor(Math.random() * USERS)}`)
  const subscriptionGet = await load(async () => {
    const q = sample().map((id) => `external_id[]=${id}`).join('&')
    return fetch(`${api}/subscription/status/get?subscription_group_id=${group.subscription_group_id}&${q}`, { headers: auth })
  })
  const exportIds = await load(() =>
    fetch(`${api}/users/export/ids`, { method: 'POST', headers: auth, body: JSON.stringify({ external_ids: sample() }) }),
  )
  await stopService(service)
  await dropQueueKeys(env.QUEUE_PREFIX)
  console.log(JSON.stringify({ subscriptionGet, exportIds }))
}

async function load(send: () => Promise<Response>) {
  const latencies: number[] = []
  let failures = 0
  const end = performance.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const r = await send()
        await r.arrayBuffer()
        if (r.status >= 300) failures++
        latencies.push(performance.now() - t0)
      }
    }),
  )
  latencies.sort((a, b) => a - b)
  return {
    requestsPerSecond: Math.round(latencies.length / SECONDS),
    p50Ms: Number(percentile(latencies, 50).toFixed(2)),
    p99Ms: Number(percentile(latencies, 99).toFixed(2)),
    failures,
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
