import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { createMetrics } from '../../shared/metrics.js'

/**
 * The alert rules (infra/prometheus/alerts.yml) checked and unit-tested by promtool (Debian's
 * `prometheus` package; `make test` installs it, infra/scripts/install-prometheus.sh), and held to
 * what an SRE needs from each: a severity, a summary, a runbook section that exists, and a test
 * of it firing and not firing.
 */
const root = path.resolve(import.meta.dirname, '../..')
const dir = path.join(root, 'infra/prometheus')
const scratch = mkdtempSync(path.join(os.tmpdir(), 'uds-promtool-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

interface Rule {
  alert?: string
  record?: string
  expr: string
  for?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
interface ExpAlert {
  exp_labels?: Record<string, string>
}
interface RuleTest {
  name: string
  alert_rule_test?: { eval_time: string; alertname: string; exp_alerts: ExpAlert[] }[]
}

const rulesFile = parse(readFileSync(path.join(dir, 'alerts.yml'), 'utf8')) as { groups: { name: string; rules: Rule[] }[] }
const testsFile = parse(readFileSync(path.join(dir, 'alerts.test.yml'), 'utf8')) as { tests: RuleTest[] }
const alerts = rulesFile.groups.flatMap((g) => g.rules).filter((r) => r.alert)

async function promtool(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)('promtool', args, { cwd: root })
    return { code: 0, out: stdout + stderr }
  } catch (e) {
    const err = e as { code?: number | string; stdout?: string; stderr?: string }
    if (err.code === 'ENOENT') throw new Error('promtool is not installed: run `make test` (infra/scripts/install-prometheus.sh installs it)')
    return { code: Number(err.code), out: `${err.stdout ?? ''}${err.stderr ?? ''}` }
  }
}

/** GitHub's anchors of the Markdown headings of a file: lower case, punctuation dropped, spaces as dashes. */
function anchors(markdown: string): Set<string> {
  const headings = [...markdown.matchAll(/^#+ (.+)$/gm)].map((m) => m[1])
  return new Set(headings.map((h) => h.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')))
}

describe('the Prometheus alert rules', () => {
  it('pass promtool check rules', async () => {
    const r = await promtool('check', 'rules', 'infra/prometheus/alerts.yml')
    expect(r.out).toContain(`SUCCESS: ${rulesFile.groups.flatMap((g) => g.rules).length} rules found`)
    expect(r.code).toBe(0)
  })

  it('pass their unit tests (promtool test rules)', async () => {
    const r = await promtool('test', 'rules', 'infra/prometheus/alerts.test.yml')
    expect(r.out).toContain('SUCCESS')
    expect(r.code).toBe(0)
  }, 120_000)

  it('give every alert a severity, a summary and a runbook section that exists', () => {
    const sections = anchors(readFileSync(path.join(root, 'docs/operations.md'), 'utf8'))
    expect(alerts.length).toBeGreaterThanOrEqual(16)
    for (const a of alerts) {
      expect(['page', 'ticket'], `${a.alert} severity`).toContain(a.labels?.severity)
      expect(a.annotations?.summary, `${a.alert} summary`).toMatch(/\S/)
      const m = /^docs\/operations\.md#([\w-]+)$/.exec(a.annotations?.runbook_url ?? '')
      expect(m, `${a.alert} runbook_url`).not.toBeNull()
      expect(sections.has(m![1]), `docs/operations.md has a section #${m![1]} for ${a.alert}`).toBe(true)
    }
  })

  it('name the queue, partition, workspace, route, table or server in the summary wherever the alert carries one', () => {
    for (const a of alerts) {
      for (const label of ['queue', 'partition', 'workspace', 'route', 'table', 'policy', 'redis', 'database']) {
        if (new RegExp(`by \\([^)]*\\b${label}\\b`).test(a.expr)) expect(a.annotations!.summary, `${a.alert} summary names ${label}`).toContain(`$labels.${label}`)
      }
    }
  })

  it('are each tested firing and not firing (each rule of an alert by its own labels)', () => {
    const evals = testsFile.tests.flatMap((t) => t.alert_rule_test ?? [])
    for (const a of alerts) {
      const own = (e: ExpAlert) => Object.entries(a.labels ?? {}).every(([k, v]) => e.exp_labels?.[k] === v)
      const mine = evals.filter((e) => e.alertname === a.alert)
      const what = `${a.alert} ${JSON.stringify(a.labels)}`
      expect(mine.some((e) => e.exp_alerts.some(own)), `${what} tested firing`).toBe(true)
      expect(mine.some((e) => !e.exp_alerts.some(own)), `${what} tested not firing`).toBe(true)
    }
  })

  it('catch a changed threshold: the lag test fails against a rule that waits for 60 s of lag', async () => {
    const rules = structuredClone(rulesFile)
    const lag = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === 'TrackPartitionLagging')!
    expect(lag.expr).toContain('> 30')
    lag.expr = lag.expr.replace('> 30', '> 60')
    const mutated = path.join(scratch, 'mutated')
    mkdirSync(mutated)
    writeFileSync(path.join(mutated, 'alerts.yml'), stringify(rules))
    const test = testsFile.tests.find((t) => t.alert_rule_test?.some((e) => e.alertname === 'TrackPartitionLagging'))!
    writeFileSync(path.join(mutated, 'lag.test.yml'), stringify({ rule_files: ['alerts.yml'], evaluation_interval: '1m', tests: [test] }))
    const r = await promtool('test', 'rules', path.join(mutated, 'lag.test.yml'))
    expect(r.code).not.toBe(0)
    expect(r.out).toMatch(/FAILED[\s\S]*TrackPartitionLagging/)
  })

  it('query only metrics the service exports', async () => {
    const exposition = await createMetrics().registry.metrics()
    const types = new Map([...exposition.matchAll(/^# TYPE (\w+) (\w+)$/gm)].map((m) => [m[1], m[2]]))
    const exported = (name: string) => types.has(name) || types.get(name.replace(/_(bucket|count|sum)$/, '')) === 'histogram'
    const used = new Set(rulesFile.groups.flatMap((g) => g.rules).flatMap((r) => [...r.expr.matchAll(/\b(uds_\w+)\b/g)].map((m) => m[1])))
    expect(used.size).toBeGreaterThan(15)
    expect([...used].filter((name) => !exported(name))).toEqual([])
  })
})

describe('the Grafana dashboard', () => {
  it('reads recording rules that alerts.yml records, in its SLO panels', () => {
    const dashboard = JSON.parse(readFileSync(path.join(root, 'infra/grafana/dashboard.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] }
    const recorded = new Set(rulesFile.groups.flatMap((g) => g.rules).flatMap((r) => (r.record ? [r.record] : [])))
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))
    const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\b(uds:\w+:\w+)\b/g)].map((m) => m[1])))
    expect([...used].sort()).toEqual(
      ['uds:api_request_errors:ratio_rate1d', 'uds:api_request_errors:ratio_rate1h', 'uds:api_request_errors:ratio_rate30d', 'uds:api_request_errors:ratio_rate3d', 'uds:api_request_errors:ratio_rate5m', 'uds:api_request_errors:ratio_rate6h',
        'uds:track_request_errors:ratio_rate1d', 'uds:track_request_errors:ratio_rate1h', 'uds:track_request_errors:ratio_rate30d', 'uds:track_request_errors:ratio_rate3d', 'uds:track_request_errors:ratio_rate5m', 'uds:track_request_errors:ratio_rate6h'],
    )
    expect([...used].filter((r) => !recorded.has(r))).toEqual([])
    const titles = dashboard.panels.map((p) => p.title)
    for (const t of ['Ingestion: error budget left', 'Ingestion: burn rate', 'Accepted -> done p50 / p99', 'API availability: error budget left', 'API availability: burn rate']) {
      expect(titles.some((x) => x.startsWith(t)), `a panel "${t}"`).toBe(true)
    }
  })
})

describe('the example Prometheus configuration', () => {
  it('passes promtool check config, rules included', async () => {
    // The token file it names must exist for the check: a copy points at one in a scratch folder.
    const token = path.join(scratch, 'admin-token')
    writeFileSync(token, 'example-admin-token-example\n')
    const config = readFileSync(path.join(dir, 'prometheus.yml'), 'utf8').replace('/etc/prometheus/userdata-admin-token', token)
    writeFileSync(path.join(scratch, 'prometheus.yml'), config)
    copyFileSync(path.join(dir, 'alerts.yml'), path.join(scratch, 'alerts.yml'))
    const r = await promtool('check', 'config', path.join(scratch, 'prometheus.yml'))
    expect(r.out).toContain('SUCCESS: 1 rule files found')
    expect(r.code).toBe(0)
  })
})
