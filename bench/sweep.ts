// The history sweep under `make run`'s layout (split) on the preloaded database: merges and deletes
// of users with history in the preload's other workspace (900,000 profiles holding 9M of the 10M
// events, so the sweep's statements meet the big parts), then small requests at 10/s in the
// measured workspace, each timed accepted -> done, while the worker's sweep squashes the merges and
// erases the deleted users in ClickHouse. IDENTITY_SWEEP_SECONDS is lowered so that the pass starts
// within the window. Each run takes users from a random block of the other workspace.
// Usage: tsx bench/sweep.ts. Prints one JSON line.
import { randomBytes, randomInt } from 'node:crypto'
import pg from 'pg'
import { Permissions } from '../shared/domain/permissions.js'
import { sleep } from './lib.js'
import { smallBody } from './ingest-load.js'
import { withLayout } from './layout.js'
import { acceptedToDone, allFinished, closedLoop, post, request, round, type Target } from './load.js'
import { readPreloaded, serviceEnv } from './preload.js'

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
/** Merges and deletes each. */
const OPS = num('BENCH_SWEEP_OPS', 5_000)
const SWEEP_SECONDS = 10
const WINDOW_SECONDS = num('BENCH_SWEEP_WINDOW_SECONDS', 40)
const PER_REQUEST = 50

/** An API key of the other workspace, its identity endpoints' limits lifted. */
async function otherWorkspaceKey(api: string, admin: string, workspaceId: string): Promise<string> {
  const call = async (method: string, p: string, body: unknown) => {
    const r = await request(api, admin, { method, path: p, body: JSON.stringify(body) })
    if (r.status >= 300) throw new Error(`${method} ${p} answered ${r.status}: ${r.body}`)
    return JSON.parse(r.body) as Record<string, string>
  }
  const key = await call('POST', `/admin/v1/workspaces/${workspaceId}/api_keys`, { name: `bench-sweep-${randomBytes(3).toString('hex')}`, permissions: [...Permissions] })
  const lifted = { limit: 1e9, window_seconds: 1 }
  await call('PUT', `/admin/v1/workspaces/${workspaceId}/rate_limits`, { default_per_hour: 1e9, endpoints: { '/users/merge': lifted, '/users/delete': lifted } })
  return key.key
}

/**
 * When the sweep ran, seen from Postgres every 100 ms: it holds an advisory lock while it works,
 * and its pending rows are gone once it is done.
 */
function watchSweep(databaseUrl: string) {
  const db = new pg.Client({ connectionString: databaseUrl })
  let startedAt: number | undefined
  let endedAt: number | undefined
  let stop = false
  const watching = (async () => {
    await db.connect()
    while (!stop && endedAt === undefined) {
      const r = await db.query<{ locked: boolean; pending: string }>(
        `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted) AS locked,
                (SELECT count(*) FROM profile_overrides) + (SELECT count(*) FROM pending_erasures) AS pending`,
      )
      const now = performance.now()
      if (r.rows[0].locked && startedAt === undefined) startedAt = now
      if (Number(r.rows[0].pending) === 0) endedAt = now
      await sleep(100)
    }
    await db.end()
  })()
  return {
    async stop() {
      stop = true
      await watching
      return { startedAt, endedAt }
    },
  }
}

async function main() {
  const preloaded = readPreloaded()
  const env: Record<string, string> = { ...serviceEnv(preloaded), IDENTITY_SWEEP_SECONDS: String(SWEEP_SECONDS) }
  await withLayout('split', env, async (layout) => {
    const measured: Target = { urls: layout.apis, key: preloaded.workspace.key }
    const other: Target = { urls: layout.apis, key: await otherWorkspaceKey(layout.apis[0], preloaded.adminToken, preloaded.otherWorkspaceId) }
    // The other workspace's users are o<n> for n past the measured workspace's profiles.
    const first = preloaded.workspace.profiles + 1 + randomInt(preloaded.profiles - preloaded.workspace.profiles - 3 * OPS)
    const user = (i: number) => `o${first + i}`
    const bodies: { path: string; body: string }[] = []
    for (let i = 0; i < OPS; i += PER_REQUEST) {
      const pairs = Array.from({ length: Math.min(PER_REQUEST, OPS - i) }, (_, k) => [user(2 * (i + k)), user(2 * (i + k) + 1)])
      bodies.push({ path: '/users/merge', body: JSON.stringify({ merge_updates: pairs.map(([keep, merge]) => ({ identifier_to_merge: { external_id: merge }, identifier_to_keep: { external_id: keep } })) }) })
      const ids = Array.from({ length: Math.min(PER_REQUEST, OPS - i) }, (_, k) => user(2 * OPS + i + k))
      bodies.push({ path: '/users/delete', body: JSON.stringify({ external_ids: ids }) })
    }
    const sent = await closedLoop({ count: bodies.length, concurrency: 8, send: (i) => post(other.urls[0], other.key, bodies[i].path, bodies[i].body) })
    const applied = await allFinished(other, sent.ids, { pollMs: 20, deadline: sent.startedAt + 120_000 })
    const identityDoneAt = performance.now()

    const sweep = watchSweep(preloaded.databaseUrl)
    const tag = randomBytes(3).toString('hex')
    const { each, ...atRate } = await acceptedToDone(
      { rps: 10, seconds: WINDOW_SECONDS, warmUpSeconds: 0, pollMs: 5, send: (i) => post(measured.urls[0], measured.key, '/users/track', smallBody(`w${tag}-${i}`)) },
      measured,
    )
    const { startedAt, endedAt } = await sweep.stop()
    const during = each.filter((e) => startedAt !== undefined && e.due >= startedAt - 1000 && (endedAt === undefined || e.due <= endedAt)).map((e) => e.ms)
    console.log(
      JSON.stringify({
        operations: { merges: OPS, deletes: OPS, failedRequests: applied.failed, requestsWithErrors: applied.withErrors, notDone: applied.pending },
        sweepIntervalSeconds: SWEEP_SECONDS,
        /** From the identity work done to the sweep's start and end (null: not seen within the window). */
        sweepStartedAfterS: startedAt === undefined ? null : round((startedAt - identityDoneAt) / 1000),
        sweepSeconds: startedAt === undefined || endedAt === undefined ? null : round((endedAt - startedAt) / 1000),
        acceptedToDone: atRate,
        /** Requests sent from a second before the sweep started until it ended: their accepted -> done. */
        whileSweeping: { requests: during.length, maxMs: round(Math.max(0, ...during)) },
      }),
    )
  })
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
