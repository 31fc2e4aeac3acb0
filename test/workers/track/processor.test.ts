import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { QueueNames } from '../../../shared/queue/queues.js'
import type { BatchEntry } from '../../../workers/runner.js'
import { createTrackProcessor } from '../../../workers/track/processor.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }
beforeAll(async () => {
  // No workers: the tests apply jobs by calling the track processor, as a worker would.
  env = await startTestEnv({ env: { TRACK_PARTITIONS: '1' } })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

/** Accepts a /users/track request; answers its job, taken off the queue. */
async function trackJob(body: unknown): Promise<BatchEntry<'applyTrackBatch'>> {
  const r = await env.call('POST', '/users/track', { key: ws.key, body })
  expect(r.status).toBe(201)
  const job = (await env.ctx.queues.get(QueueNames.track(0)).getJob(`${r.headers.get('x-request-id')}_0`))!
  await job.remove()
  return { id: job.id!, data: job.data }
}

async function apply(...jobs: BatchEntry<'applyTrackBatch'>[]): Promise<void> {
  const processor = createTrackProcessor({
    config: env.config,
    logger: env.ctx.logger,
    pg: env.ctx.pg,
    clickhouse: env.clickhouse,
    producer: { queues: env.ctx.queues, tracker: env.ctx.tracker },
    metrics: env.metrics,
  })
  for (const outcome of await processor.apply(jobs)) expect(outcome.status).toBe('ok')
}

const updatedAt = async (externalId: string): Promise<Date> =>
  (await env.ctx.pg.query('SELECT updated_at FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, externalId])).rows[0].updated_at

describe('the track processor', () => {
  it('stamps the updated_at of a profile that only had events when a worker died between the commit and the stamp', async () => {
    await apply(await trackJob({ attributes: [{ external_id: 'quiet' }] }))
    const created = await updatedAt('quiet')
    const events = await trackJob({ events: [{ external_id: 'quiet', name: 'ping', time: '2026-03-01T10:00:00.000Z' }] })
    await apply(events)
    const ledger = await env.ctx.pg.query(`SELECT outbox->'occurred'->>'at' AS at FROM applied_jobs WHERE job_key = $1`, [`track:${events.id}`])
    const stampedAt = new Date(ledger.rows[0].at)
    expect(await updatedAt('quiet')).toEqual(stampedAt)
    expect(stampedAt.getTime()).toBeGreaterThan(created.getTime())

    // The state a worker killed right after that commit leaves: applied, not completed, not stamped.
    await env.ctx.pg.query('UPDATE applied_jobs SET completed = false WHERE job_key = $1', [`track:${events.id}`])
    await env.ctx.pg.query('UPDATE profiles SET updated_at = $3 WHERE workspace_id = $1 AND external_id = $2', [ws.id, 'quiet', created])
    // The next worker takes that job again beside a new one: it applies only the new one and stamps both.
    await apply(events, await trackJob({ events: [{ external_id: 'other', name: 'ping', time: '2026-03-01T10:00:00.000Z' }] }))
    expect(await updatedAt('quiet')).toEqual(stampedAt)
    const summary = await env.ctx.pg.query(
      `SELECT s.count FROM profile_event_summaries s JOIN profiles p ON p.id = s.profile_id WHERE p.workspace_id = $1 AND p.external_id = 'quiet'`,
      [ws.id],
    )
    expect(summary.rows.map((r) => Number(r.count))).toEqual([1])
  })
})
