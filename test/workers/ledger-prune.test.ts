import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../shared/config.js'
import { pruneLedger } from '../../shared/db/repositories/job-ledger-repository.js'
import { QueueNames } from '../../shared/queue/queues.js'
import { pruneAppliedJobs } from '../../workers/ledger-prune.js'
import type { BatchEntry } from '../../workers/runner.js'
import { ReadPriority } from '../../workers/engine/priority.js'
import { createTrackProcessor } from '../../workers/track/processor.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

let env: TestEnv
let ws: { id: string; key: string }
beforeAll(async () => {
  // No workers until the last test: the others apply jobs by calling the track processor, as a worker would.
  env = await startTestEnv({ env: { TRACK_PARTITIONS: '1', LEDGER_PRUNE_SECONDS: '1' } })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

const DAY = 86_400

/** Accepts a /users/track request adding 1 to `user`'s counter; answers its job, taken off the queue. */
async function trackJob(user: string): Promise<BatchEntry<'applyTrackBatch'>> {
  const r = await env.call('POST', '/users/track', { key: ws.key, body: { attributes: [{ external_id: user, counter: { inc: 1 } }] } })
  expect(r.status).toBe(201)
  const job = (await env.ctx.queues.get(QueueNames.track(0)).getJob(`${r.headers.get('x-request-id')}_0`))!
  await job.remove()
  return { id: job.id!, data: job.data }
}

/** Applies jobs as the track worker does: through the exactly-once ledger. */
async function apply(...jobs: BatchEntry<'applyTrackBatch'>[]): Promise<void> {
  const processor = createTrackProcessor({
    config: env.config,
    logger: env.ctx.logger,
    pg: env.ctx.pg,
    clickhouse: env.clickhouse,
    producer: { queues: env.ctx.queues, tracker: env.ctx.tracker },
    metrics: env.metrics,
    readsFirst: () => new ReadPriority().yield(),
  })
  for (const outcome of await processor.apply(jobs)) expect(outcome.status).toBe('ok')
}

async function counterOf(user: string): Promise<unknown> {
  const { users } = await env.readUsers(ws.key, { external_ids: [user] })
  return users[0]?.custom_attributes?.counter
}

async function ledgerRows(): Promise<Map<string, { completed: boolean; ageDays: number }>> {
  const r = await env.ctx.pg.query<{ job_key: string; completed: boolean; age_days: number }>(
    `SELECT job_key, completed, extract(epoch FROM now() - applied_at) / 86400 AS age_days FROM applied_jobs`,
  )
  return new Map(r.rows.map((row) => [row.job_key, { completed: row.completed, ageDays: Number(row.age_days) }]))
}

async function age(job: BatchEntry<'applyTrackBatch'>, days: number, opts: { completed?: boolean } = {}): Promise<void> {
  const r = await env.ctx.pg.query(`UPDATE applied_jobs SET applied_at = now() - make_interval(days => $2), completed = $3 WHERE job_key = $1`, [
    `track:${job.id}`,
    days,
    opts.completed ?? true,
  ])
  expect(r.rowCount).toBe(1)
}

describe('the applied-jobs ledger prune', () => {
  it('keeps every row by default for 8 days, longer than BullMQ keeps a failed job for a retry, and refuses less', () => {
    expect(loadConfig({}).LEDGER_RETENTION_SECONDS).toBe(8 * DAY)
    expect(() => loadConfig({ LEDGER_RETENTION_SECONDS: String(7 * DAY) })).toThrow(/LEDGER_RETENTION_SECONDS/)
  })

  it('deletes completed rows past the retention and keeps recent rows and rows still owing ClickHouse', async () => {
    const old = await trackJob('prune-old')
    const recent = await trackJob('prune-recent')
    const owing = await trackJob('prune-owing')
    await apply(old)
    await apply(recent)
    await apply(owing)
    await age(old, 9)
    await age(recent, 7)
    await age(owing, 30, { completed: false })

    expect(await pruneAppliedJobs({ pg: env.ctx.pg, config: env.config })).toBe(1)
    const rows = await ledgerRows()
    expect(rows.has(`track:${old.id}`)).toBe(false)
    expect(rows.get(`track:${recent.id}`)?.completed).toBe(true)
    expect(rows.get(`track:${owing.id}`)?.completed).toBe(false)
    expect(await pruneAppliedJobs({ pg: env.ctx.pg, config: env.config })).toBe(0)
    await env.ctx.pg.query(`DELETE FROM applied_jobs WHERE job_key = $1`, [`track:${owing.id}`])
  })

  it('takes a bounded chunk per statement, oldest first', async () => {
    const jobs = [await trackJob('chunk-a'), await trackJob('chunk-b'), await trackJob('chunk-c')]
    await apply(...jobs)
    await age(jobs[0], 12)
    await age(jobs[1], 11)
    await age(jobs[2], 10)

    expect(await pruneLedger(env.ctx.pg, 8 * DAY, 2)).toBe(2)
    const left = await ledgerRows()
    expect([jobs[0], jobs[1], jobs[2]].map((j) => left.has(`track:${j.id}`))).toEqual([false, false, true])
    expect(await pruneLedger(env.ctx.pg, 8 * DAY, 2)).toBe(1)
    expect(await pruneLedger(env.ctx.pg, 8 * DAY, 2)).toBe(0)
  })

  it('still applies a job replayed inside the window only once after a prune', async () => {
    const job = await trackJob('replayed')
    await apply(job)
    expect(await counterOf('replayed')).toBe(1)
    await age(job, 7)

    await pruneAppliedJobs({ pg: env.ctx.pg, config: env.config })
    expect((await ledgerRows()).has(`track:${job.id}`)).toBe(true)
    await apply(job)
    expect(await counterOf('replayed')).toBe(1)
  })

  it('runs every LEDGER_PRUNE_SECONDS in a track worker process', async () => {
    const job = await trackJob('scheduled')
    await apply(job)
    await age(job, 9)
    await env.startWorkers(['track'])
    await until('the scheduled prune to delete the old row', ledgerRows, (rows) => !rows.has(`track:${job.id}`), 10_000)
  })
})
