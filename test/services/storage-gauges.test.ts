import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { watchStorageSettings } from '../../services/storage-gauges.js'
import { createMetrics, type Metrics } from '../../shared/metrics.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

let env: TestEnv
let metrics: Metrics
let watch: ReturnType<typeof watchStorageSettings>
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
  metrics = createMetrics()
  // A long interval: the test refreshes by hand.
  watch = watchStorageSettings(env.ctx, metrics, 3_600_000)
})
afterAll(async () => {
  watch?.stop()
  await env?.close()
})

/** Samples of one metric, by their label values joined. */
async function samples(name: string): Promise<Map<string, number>> {
  const metric = await metrics.registry.getSingleMetric(name)!.get()
  return new Map(metric.values.map((v) => [Object.values(v.labels).join(','), v.value]))
}

/** The servers as the gauges name them: host:port, and the database's name. */
const redis = () => new URL(env.config.REDIS_URL).host
const database = () => `${new URL(env.config.DATABASE_URL).host}/${env.dbName}`

describe('the storage gauges the alerts read', () => {
  it('are absent until read, never a 0 that would read as "off"', async () => {
    const unread = createMetrics()
    for (const name of ['uds_redis_aof_enabled', 'uds_redis_maxmemory_policy_evicting', 'uds_postgres_autovacuum_enabled', 'uds_postgres_dead_rows']) {
      expect((await unread.registry.getSingleMetric(name)!.get()).values, name).toEqual([])
    }
  })

  it('report Redis AOF and eviction as this Redis is configured, naming the server', async () => {
    await watch.refresh()
    const [, aof] = (await env.ctx.redis.config('GET', 'appendonly')) as string[]
    const [, policy] = (await env.ctx.redis.config('GET', 'maxmemory-policy')) as string[]
    expect(await samples('uds_redis_aof_enabled')).toEqual(new Map([[redis(), aof === 'yes' ? 1 : 0]]))
    expect(await samples('uds_redis_maxmemory_policy_evicting')).toEqual(new Map([[`${redis()},${policy}`, policy === 'noeviction' ? 0 : 1]]))
  })

  it('report autovacuum, and the dead rows of a hot table as they pile up and are vacuumed', async () => {
    await watch.refresh()
    const { rows } = await env.ctx.pg.query<{ av: string; tc: string }>(`SELECT current_setting('autovacuum') AS av, current_setting('track_counts') AS tc`)
    expect(await samples('uds_postgres_autovacuum_enabled')).toEqual(new Map([[database(), rows[0].av === 'on' && rows[0].tc === 'on' ? 1 : 0]]))
    const table = (t: string) => `${database()},${t}`
    expect([...(await samples('uds_postgres_dead_rows')).keys()].sort()).toEqual(['applied_jobs', 'profile_aliases', 'profiles'].map(table))

    await env.ctx.pg.query(`INSERT INTO applied_jobs (job_key, workspace_id) SELECT 'g' || g, 'ws' FROM generate_series(1, 3000) g`)
    await env.ctx.pg.query(`DELETE FROM applied_jobs WHERE job_key LIKE 'g%'`)
    // Statistics reach pg_stat_user_tables a moment after the commit.
    const dead = await until(
      'the dead rows in the gauge',
      async () => (await watch.refresh(), (await samples('uds_postgres_dead_rows')).get(table('applied_jobs')) ?? 0),
      (n) => n >= 3000,
      10_000,
      200,
    )
    expect(dead).toBeGreaterThanOrEqual(3000)
    expect((await samples('uds_postgres_dead_row_ratio')).get(table('applied_jobs'))).toBeGreaterThan(0.9)
    await env.ctx.pg.query('VACUUM applied_jobs')
    await until('the vacuumed table in the gauge', async () => (await watch.refresh(), (await samples('uds_postgres_dead_rows')).get(table('applied_jobs'))), (n) => n === 0, 10_000, 200)
  })
})
