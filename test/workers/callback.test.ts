import type { Job } from 'bullmq'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RetryableError } from '../../shared/errors.js'
import { submitRequest } from '../../shared/queue/jobs.js'
import { createCallbackProcessor } from '../../workers/callback/processor.js'
import { isPrivateAddress } from '../../workers/callback/private-addresses.js'
import type { WorkerDeps } from '../../workers/deps.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { localServer } from '../helpers/ports.js'

/** A local endpoint answering each POST with the next status of `statuses` (the last one repeats). */
async function endpoint(statuses: number[]) {
  const received: { body: unknown; contentType?: string }[] = []
  const server = await localServer((req, res) => {
    let data = ''
    req.on('data', (c) => (data += c))
    req.on('end', () => {
      received.push({ body: JSON.parse(data), contentType: req.headers['content-type'] })
      res.statusCode = statuses[Math.min(received.length - 1, statuses.length - 1)]
      res.end()
    })
  })
  return { received, url: `${server.url}/export-ready`, close: server.close }
}

const job = {} as Job
const processorWith = (allowPrivate: boolean) =>
  createCallbackProcessor({ config: { CALLBACK_ALLOW_PRIVATE: allowPrivate } } as unknown as WorkerDeps)
const callbackJob = (url: string) => ({ workspaceId: 'w', requestId: 'r', exportId: 'e', url, body: { success: true, url: 'https://files/x.zip' } })

describe('callback address rules', () => {
  it('treats loopback, private, link-local and unique-local addresses as private', () => {
    for (const a of ['127.0.0.1', '127.9.9.9', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '0.0.0.0', '::1', '::', 'fc00::1', 'fd12::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1']) {
      expect(isPrivateAddress(a), a).toBe(true)
    }
    for (const a of ['8.8.8.8', '172.32.0.1', '172.15.255.255', '192.169.0.1', '2001:4860:4860::8888', '::ffff:8.8.8.8']) {
      expect(isPrivateAddress(a), a).toBe(false)
    }
  })
})

describe('callback processor', () => {
  it('POSTs the JSON body to the endpoint', async () => {
    const e = await endpoint([204])
    const url = e.url
    try {
      expect(await processorWith(true)(callbackJob(url), job)).toEqual({ status: 'ok', applied: undefined })
      expect(e.received).toEqual([{ body: { success: true, url: 'https://files/x.zip' }, contentType: 'application/json' }])
    } finally {
      await e.close()
    }
  })

  it('refuses loopback endpoints unless CALLBACK_ALLOW_PRIVATE, without sending anything', async () => {
    const e = await endpoint([200])
    const url = e.url
    try {
      const outcome = await processorWith(false)(callbackJob(url), job)
      expect(outcome).toMatchObject({ status: 'fail', reason: expect.stringMatching(/private or loopback address 127\.0\.0\.1/) })
      const byName = await processorWith(false)(callbackJob(url.replace('127.0.0.1', 'localhost')), job)
      expect(byName).toMatchObject({ status: 'fail', reason: expect.stringMatching(/localhost resolves to the private or loopback address/) })
      const v6 = await processorWith(false)(callbackJob('http://[::1]:9/x'), job)
      expect(v6).toMatchObject({ status: 'fail', reason: expect.stringMatching(/address ::1/) })
      expect(e.received).toEqual([])
    } finally {
      await e.close()
    }
  })

  it('fails a malformed or non-http URL and a 4xx answer; retries 5xx, 429 and unreachable endpoints', async () => {
    const p = processorWith(true)
    expect(await p(callbackJob('not a url'), job)).toMatchObject({ status: 'fail', reason: expect.stringMatching(/malformed URL/) })
    expect(await p(callbackJob('ftp://example.com/x'), job)).toMatchObject({ status: 'fail', reason: expect.stringMatching(/unsupported scheme ftp:/) })
    const e = await endpoint([404, 503, 429, 302])
    const url = e.url
    try {
      expect(await p(callbackJob(url), job)).toMatchObject({ status: 'fail', reason: expect.stringMatching(/endpoint answered 404/) })
      await expect(p(callbackJob(url), job)).rejects.toBeInstanceOf(RetryableError)
      await expect(p(callbackJob(url), job)).rejects.toBeInstanceOf(RetryableError)
      expect(await p(callbackJob(url), job)).toMatchObject({ status: 'fail', reason: expect.stringMatching(/redirects are not followed/) })
    } finally {
      await e.close()
    }
    await expect(p(callbackJob(url), job)).rejects.toThrow(/callback request failed: connect ECONNREFUSED/)
  })
})

describe('callback queue', () => {
  let env: TestEnv
  beforeAll(async () => {
    env = await startTestEnv({ workers: ['callback'] })
  })
  afterAll(async () => {
    await env.close()
  })

  it('retries a failing endpoint with backoff until it accepts the callback', async () => {
    const e = await endpoint([503, 200])
    const url = e.url
    try {
      const ws = await env.workspace()
      await submitRequest({ queues: env.ctx.queues, tracker: env.ctx.tracker }, {
        workspaceId: ws.id,
        requestId: 'cb-retry',
        jobs: [{ name: 'deliverCallback', data: { workspaceId: ws.id, requestId: 'cb-retry', exportId: 'x', url, body: { success: true } } }],
      })
      expect(await env.waitForRequest(ws.key, 'cb-retry', 30_000)).toMatchObject({ status: 'done' })
      expect(e.received.map((r) => r.body)).toEqual([{ success: true }, { success: true }])
    } finally {
      await e.close()
    }
  })

  it('records a refused endpoint as a failed request without crashing the worker', async () => {
    const ws = await env.workspace()
    await submitRequest({ queues: env.ctx.queues, tracker: env.ctx.tracker }, {
      workspaceId: ws.id,
      requestId: 'cb-bad',
      jobs: [{ name: 'deliverCallback', data: { workspaceId: ws.id, requestId: 'cb-bad', exportId: 'x', url: 'http://', body: { success: true } } }],
    })
    const done = await env.waitForRequest(ws.key, 'cb-bad', 30_000)
    expect(done.status).toBe('failed')
    expect(done.errors).toEqual([{ message: expect.stringMatching(/malformed URL/) }])
  })
})
