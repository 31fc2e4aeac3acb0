import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { sleep, until } from '../helpers/wait.js'
import { exited, killSpawnedWorkers, runHelperScript, spawnWorkerProcess } from '../helpers/worker-process.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ engine: false })
})
afterAll(async () => {
  killSpawnedWorkers()
  await env.close()
})

const GROUPS = 240
const EVENTS = 2
const t = (n: number) => new Date(Date.now() - (n + 1) * 1000).toISOString()
const ids = (from: string, to: string) => ({ identifier_to_merge: { external_id: from }, identifier_to_keep: { external_id: to } })
const chunks = <T>(items: T[], size: number) => Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

/**
 * Per group g: users a, b, c with EVENTS events each. Every group's a is merged into b, then (in a
 * later request) every b into c: chains, across batches. Then a third of the c's are deleted
 * (taking the histories merged into them), and another third absorb an alias-only user x through
 * /users/identify. Applied once and in order, no request reports an error: a merge applied twice,
 * or the second link of a chain applied before the first, would find nobody (`user_not_found`).
 */
function identityRequests(): [string, unknown][] {
  const groups = Array.from({ length: GROUPS }, (_, g) => g)
  return [
    ...chunks(groups, 50).map((gs): [string, unknown] => ['/users/merge', { merge_updates: gs.map((g) => ids(`a${g}`, `b${g}`)) }]),
    ...chunks(groups, 50).map((gs): [string, unknown] => ['/users/merge', { merge_updates: gs.map((g) => ids(`b${g}`, `c${g}`)) }]),
    ...chunks(groups.filter((g) => g % 3 === 0), 50).map((gs): [string, unknown] => ['/users/delete', { external_ids: gs.map((g) => `c${g}`) }]),
    ...chunks(groups.filter((g) => g % 3 === 2), 50).map((gs): [string, unknown] => [
      '/users/identify',
      { aliases_to_identify: gs.map((g) => ({ external_id: `c${g}`, user_alias: { alias_name: `x${g}`, alias_label: 'crm' } })) },
    ]),
  ]
}

/** The helper's JSON: events each kept profile shows, then rows left after a sweep. */
function historyCounts(dataDir: string, workspaceId: string, profiles: { kept: number[]; merged: number[]; erased: number[] }) {
  return runHelperScript('identity-history-counts.ts', [dataDir, env.dbName, workspaceId, env.config.DATABASE_URL, JSON.stringify(profiles)])
}

describe('an identity worker killed with SIGKILL inside batches, again and again', () => {
  it('applies every merge, identify and delete exactly once and in order, and the history follows', async () => {
    const ws = await env.workspace()
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-crash-identity-'))

    // The users, applied by a track worker of the same data directory (its ClickHouse holds their events).
    let worker = spawnWorkerProcess(env, dataDir, ['track'])
    const users = Array.from({ length: GROUPS }, (_, g) => [`a${g}`, `b${g}`, `c${g}`]).flat()
    for (const part of chunks(users, 25)) {
      const events = part.flatMap((u) => Array.from({ length: EVENTS }, (_, i) => ({ external_id: u, name: 'played', time: t(i) })))
      await env.writeAndWait(ws.key, '/users/track', { events })
    }
    const aliasOnly = Array.from({ length: GROUPS }, (_, g) => g).filter((g) => g % 3 === 2)
    for (const part of chunks(aliasOnly, 50)) {
      const alias = (g: number) => ({ user_alias: { alias_name: `x${g}`, alias_label: 'crm' } })
      await env.writeAndWait(ws.key, '/users/track', {
        attributes: part.map((g) => ({ ...alias(g), _update_existing_only: false, first_name: `X${g}` })),
        events: part.map((g) => ({ ...alias(g), name: 'played', time: t(9) })),
      })
    }
    worker.kill('SIGTERM')
    expect(await exited(worker)).toBe(0)
    const byName = new Map<string, number>()
    for (const r of (await env.ctx.pg.query('SELECT id, external_id, first_name FROM profiles WHERE workspace_id = $1', [ws.id])).rows) {
      byName.set(r.external_id ?? `x${String(r.first_name).slice(1)}`, Number(r.id))
    }

    // The identity requests, a few more before each worker starts: each worker finds a backlog and applies it in batches.
    const requests = identityRequests()
    const requestIds: string[] = []
    const accept = async (n: number) => {
      for (const [p, body] of requests.splice(0, n)) {
        const r = await env.call('POST', p, { key: ws.key, body })
        expect(r.status, r.text).toBeLessThan(300)
        requestIds.push(r.headers.get('x-request-id')!)
      }
    }
    const committed = async () =>
      Number((await env.ctx.pg.query(`SELECT count(*) AS n FROM applied_jobs WHERE workspace_id = $1 AND job_key LIKE 'identity:%'`, [ws.id])).rows[0].n)
    const total = identityRequests().length

    const killedMidway: number[] = []
    for (let round = 0; round < 12; round++) {
      await accept(2)
      const before = await committed()
      if (before >= total) break
      worker = spawnWorkerProcess(env, dataDir, ['track', 'identity'])
      await until(`round ${round} to commit a batch`, committed, (n) => n > before, 60_000)
      // Killed at a random instant after its first commit: between a commit and ClickHouse, or inside the next batch.
      await sleep(Math.random() * 150)
      worker.kill('SIGKILL')
      await exited(worker)
      const progress = await committed()
      if (progress < total) killedMidway.push(progress)
    }
    expect(killedMidway.length).toBeGreaterThanOrEqual(3)

    worker = spawnWorkerProcess(env, dataDir, ['track', 'identity'])
    for (const id of requestIds) expect(await env.waitForRequest(ws.key, id, 120_000)).toEqual({ request_id: id, status: 'done' })
    // The last kill may have come after the last report: then wait for the new worker to be up before stopping it.
    await until('the last worker to start', () => env.ctx.queues.get('identity').getWorkersCount(), (n) => n > 0, 60_000)
    worker.kill('SIGTERM')
    expect(await exited(worker)).toBe(0)

    // Postgres: one profile per group not deleted (c), holding the group's aliases (its history is ClickHouse's, below).
    const rows = await env.ctx.pg.query(
      `SELECT p.id, p.external_id, (SELECT count(*)::int FROM profile_aliases a WHERE a.profile_id = p.id) AS aliases
         FROM profiles p WHERE p.workspace_id = $1 ORDER BY p.id`,
      [ws.id],
    )
    const kept = Array.from({ length: GROUPS }, (_, g) => g).filter((g) => g % 3 !== 0)
    const expected = (g: number) => 3 * EVENTS + (g % 3 === 2 ? 1 : 0)
    const byExternalId = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]))
    expect(rows.rows.map((r) => [r.external_id, r.aliases]).sort(byExternalId)).toEqual(
      kept.map((g) => [`c${g}`, g % 3 === 2 ? 1 : 0]).sort(byExternalId),
    )
    const batches = await env.ctx.pg.query(`SELECT count(*)::int AS n FROM applied_jobs WHERE workspace_id = $1 GROUP BY batch_key ORDER BY n DESC LIMIT 1`, [ws.id])
    expect(batches.rows[0].n).toBeGreaterThan(1)

    // ClickHouse: each kept user shows the group's events at once; after a sweep the merged users' rows live under
    // them, and nothing of the deleted groups is left on disk.
    const group = (g: number) => [`a${g}`, `b${g}`, `c${g}`, `x${g}`].flatMap((n) => byName.get(n) ?? [])
    const deleted = Array.from({ length: GROUPS }, (_, g) => g).filter((g) => g % 3 === 0)
    const counts = await historyCounts(dataDir, ws.id, {
      kept: kept.map((g) => byName.get(`c${g}`)!),
      merged: kept.flatMap((g) => group(g).filter((id) => id !== byName.get(`c${g}`))),
      erased: deleted.flatMap(group),
    })
    expect(counts.visible).toEqual(Object.fromEntries(kept.map((g) => [byName.get(`c${g}`)!, expected(g)])))
    expect(counts.keptEvents.unique).toBe(kept.reduce((n, g) => n + expected(g), 0))
    expect(counts.mergedEvents.rows).toBe(0)
    expect(counts.erasedEvents.rows).toBe(0)
    expect(counts.erasedSnapshots.rows).toBe(0)
  }, 300_000)
})
