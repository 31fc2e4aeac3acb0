import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { warnAboutPostgresVacuum } from '../../services/postgres-check.js'
import { autovacuumEnabled } from '../../shared/db/repositories/vacuum-repository.js'
import { createLogger } from '../../shared/logger.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv({ workers: [] })
})
afterAll(async () => {
  await env?.close()
})

/** The warnings the check logs, as parsed log lines. */
async function warnings(): Promise<{ msg: string; table?: string; dead_rows?: number }[]> {
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean))
      done()
    },
  })
  await warnAboutPostgresVacuum(env.ctx.pg, createLogger('warn', sink))
  return lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40)
}

describe('the Postgres check at start', () => {
  it('warns exactly when autovacuum is off on this server', async () => {
    const off = !(await autovacuumEnabled(env.ctx.pg))
    const { rows } = await env.ctx.pg.query<{ on: string }>(`SELECT current_setting('autovacuum') AS on`)
    expect(off).toBe(rows[0].on !== 'on')
    expect((await warnings()).some((w) => /^Postgres autovacuum is off/.test(w.msg))).toBe(off)
  })

  it('names a hot table made mostly of dead rows, and says what to run', async () => {
    expect((await warnings()).filter((w) => w.table)).toEqual([])
    await env.ctx.pg.query(`INSERT INTO applied_jobs (job_key, workspace_id) SELECT 'k' || g, 'ws' FROM generate_series(1, 12000) g`)
    await env.ctx.pg.query(`DELETE FROM applied_jobs`)
    // Statistics reach pg_stat_user_tables a moment after the commit.
    const found = await until('the dead rows to be reported', warnings, (ws) => ws.some((w) => w.table === 'applied_jobs'), 10_000, 200)
    const w = found.find((x) => x.table === 'applied_jobs')!
    expect(w.dead_rows).toBeGreaterThanOrEqual(12_000)
    expect(w.msg).toMatch(/^Postgres table applied_jobs is \d+% dead rows: run VACUUM ANALYZE applied_jobs/)
    await env.ctx.pg.query('VACUUM applied_jobs')
    await until('the table to be clean again', warnings, (ws) => !ws.some((x) => x.table === 'applied_jobs'), 10_000, 200)
  })
})
