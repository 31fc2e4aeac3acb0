import { existsSync } from 'node:fs'
import { Worker } from 'bullmq'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SESSION_COOKIE } from '../../../services/api/routes/queue-dashboard.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { sleep, until } from '../../helpers/wait.js'

const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/**
 * Puts `count` jobs of `queue` in the failed set through a worker that fails everything, then
 * stops it; answers when the last one failed.
 */
async function failedJobs(env: TestEnv, queue: string, count: number): Promise<number> {
  const worker = new Worker(
    queue,
    async () => {
      throw new Error('made to fail by the dashboard test')
    },
    { connection: env.ctx.workerRedis(), prefix: env.config.QUEUE_PREFIX },
  )
  for (let i = 0; i < count; i++) await env.ctx.queues.get(queue).add('probe', { i })
  await until(`${count} failed ${queue} jobs`, () => env.ctx.queues.get(queue).getJobCounts('failed'), (c) => c.failed === count)
  await worker.close()
  return Date.now()
}

/** Bull Board's "Clean all" spares jobs that finished less than 5 s ago. */
const CLEAN_GRACE_MS = 5_000

const missing = !existsSync(CHROMIUM)

describe.skipIf(missing)(`queue dashboard and API docs in headless Chromium${missing ? ` (skipped: ${CHROMIUM} is missing; run infra/scripts/install-browser.sh)` : ''}`, () => {
  let env: TestEnv
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let exportJobsFailedAt: number
  /** What the pages' Content-Security-Policy refused, as the browser reports it. */
  const refusedByPolicy: string[] = []

  beforeAll(async () => {
    env = await startTestEnv()
    await failedJobs(env, 'callback', 2)
    exportJobsFailedAt = await failedJobs(env, 'export', 3)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
    context = await browser.newContext()
    // Only the service under test: Bull Board's page also links a web font, which must not leave the machine.
    await context.route((url) => url.hostname !== '127.0.0.1', (route) => route.abort())
    page = await context.newPage()
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) refusedByPolicy.push(m.text())
    })
  })

  afterAll(async () => {
    await browser?.close()
    await env?.close()
  })

  it('refuses the dashboard without the admin token', async () => {
    const res = await page.goto(`${env.baseUrl}/admin/queues`)
    expect(res?.status()).toBe(401)
    expect(await page.locator('body').innerText()).toContain('?token=<ADMIN_TOKEN>')
  })

  it('logs in once with ?token=, drops the token from the address and keeps an HttpOnly strict cookie', async () => {
    const res = await page.goto(`${env.baseUrl}/admin/queues?token=${encodeURIComponent(env.adminToken)}`)
    expect(res?.status()).toBe(200)
    expect(page.url()).toBe(`${env.baseUrl}/admin/queues`)
    const cookie = (await context.cookies(`${env.baseUrl}/admin/queues`)).find((c) => c.name === SESSION_COOKIE)
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/admin/queues' })
    expect(cookie!.value).not.toContain(env.adminToken)
  })

  it('shows every queue and every track partition', async () => {
    await page.goto(`${env.baseUrl}/admin/queues`)
    for (const name of ['identity', 'export', 'callback', 'track-0', 'track-1', 'track-2', 'track-3']) {
      await expect.poll(() => page.getByText(name, { exact: true }).count(), { timeout: 15_000 }).toBeGreaterThan(0)
    }
  })

  it('retries all failed jobs of a queue from the dashboard', async () => {
    await page.goto(`${env.baseUrl}/admin/queues/queue/callback?status=failed`)
    await page.getByRole('button', { name: 'Retry all' }).click()
    await page.getByRole('button', { name: 'Confirm' }).click()
    // No callback worker runs here, so retried jobs wait.
    const counts = await until('retried callback jobs', () => env.ctx.queues.get('callback').getJobCounts('failed', 'waiting'), (c) => c.waiting === 2)
    expect(counts.failed).toBe(0)
  })

  it('cleans all failed jobs of a queue from the dashboard', async () => {
    await sleep(Math.max(0, exportJobsFailedAt + CLEAN_GRACE_MS + 500 - Date.now()))
    await page.goto(`${env.baseUrl}/admin/queues/queue/export?status=failed`)
    await page.getByRole('button', { name: 'Clean all' }).click()
    await page.getByRole('button', { name: 'Confirm' }).click()
    const counts = await until('cleaned export jobs', () => env.ctx.queues.get('export').getJobCounts('failed', 'waiting'), (c) => c.failed === 0)
    expect(counts.waiting).toBe(0)
  })

  it("sends the board's pages with the security headers, and its policy refuses nothing of its own", async () => {
    const res = await page.goto(`${env.baseUrl}/admin/queues/queue/export`)
    expect(res?.status()).toBe(200)
    const headers = res!.headers()
    expect(headers['x-frame-options']).toBe('DENY')
    expect(headers['x-content-type-options']).toBe('nosniff')
    expect(headers['referrer-policy']).toBe('same-origin')
    expect(headers['content-security-policy']).toMatch(/frame-ancestors 'none'/)
    expect(headers['content-security-policy']).toMatch(/script-src 'self'(;|$)/)
    await expect.poll(() => page.getByText('callback', { exact: true }).count(), { timeout: 15_000 }).toBeGreaterThan(0)
    // Only the web font Bull Board links from another site is refused: the page keeps to this service.
    expect(refusedByPolicy.filter((m) => !m.includes('fonts.googleapis.com'))).toEqual([])
  })

  it('renders the API docs page with every documented endpoint', async () => {
    const doc = await (await fetch(`${env.baseUrl}/openapi.json`)).json()
    const operations = Object.values(doc.paths as Record<string, object>).reduce((n, ops) => n + Object.keys(ops).length, 0)
    await page.goto(`${env.baseUrl}/docs`)
    await expect.poll(() => page.locator('.opblock').count(), { timeout: 15_000 }).toBe(operations)
    for (const path of ['/users/track', '/users/export/ids', '/admin/v1/workspaces', '/requests/{id}', '/metrics']) {
      expect(await page.locator('.opblock-summary-path', { hasText: path }).count()).toBeGreaterThan(0)
    }

    // An operation opens onto its request body, built from the route's zod schema.
    await page.locator('.opblock-post', { has: page.locator('.opblock-summary-path', { hasText: /^\/users\/export\/ids$/ }) }).locator('.opblock-summary').click()
    await page.getByRole('button', { name: 'Schema' }).first().click()
    await expect.poll(() => page.locator('.opblock-body').first().innerText(), { timeout: 10_000 }).toContain('fields_to_export')
    // Its inline script ran under a policy that allows it by hash alone.
    const headers = (await (await fetch(`${env.baseUrl}/docs`)).headers)
    expect(headers.get('content-security-policy')).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+';/)
    expect(headers.get('x-frame-options')).toBe('DENY')
    expect(refusedByPolicy.filter((m) => !m.includes('fonts.googleapis.com'))).toEqual([])
  })
})
