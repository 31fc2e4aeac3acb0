import net from 'node:net'
import type { Job } from 'bullmq'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { RetryableError } from '../../shared/errors.js'
import type { ResolveHost } from '../../shared/net/callback-target.js'
import { submitRequest } from '../../shared/queue/jobs.js'
import { createCallbackProcessor } from '../../workers/callback/processor.js'
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
const processorWith = (allowPrivate: boolean, resolve?: ResolveHost) =>
  createCallbackProcessor({ config: { CALLBACK_ALLOW_PRIVATE: allowPrivate } } as unknown as WorkerDeps, { resolve })
const callbackJob = (url: string) => ({ workspaceId: 'w', requestId: 'r', exportId: 'e', url, body: { success: true, url: 'https://files/x.zip' } })

/** A resolver answering `address` for every name, counting its calls. */
function answering(address: string) {
  const calls: string[] = []
  const resolve: ResolveHost = async (host) => {
    calls.push(host)
    return [{ address, family: net.isIP(address) }]
  }
  return { resolve, calls }
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1'])

describe('callback processor', () => {
  // A safety net and a witness: every socket connect of this process is recorded, and one aimed
  // anywhere but loopback throws before it is made, so even a broken check sends nothing off the machine.
  const connects: string[] = []
  beforeAll(() => {
    const connect = net.Socket.prototype.connect
    vi.spyOn(net.Socket.prototype, 'connect').mockImplementation(function (this: net.Socket, ...args: unknown[]) {
      const first = (Array.isArray(args[0]) ? args[0][0] : args[0]) as { host?: string; path?: string | null } | number
      const host = typeof first === 'object' ? first.host : (args[1] as string | undefined)
      if (typeof first === 'object' && first.path == null) {
        connects.push(host ?? 'localhost')
        if (!LOOPBACK_HOSTS.has(host ?? 'localhost')) throw new Error(`test guard: a socket was about to connect to ${host}`)
      }
      return (connect as (...a: unknown[]) => net.Socket).apply(this, args)
    } as typeof connect)
  })
  afterAll(() => {
    vi.restoreAllMocks()
  })

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
      expect(outcome).toMatchObject({ status: 'fail', reason: expect.stringMatching(/127\.0\.0\.1 is a loopback address; callbacks go to public addresses only/) })
      const byName = await processorWith(false)(callbackJob(url.replace('127.0.0.1', 'localhost')), job)
      expect(byName).toMatchObject({ status: 'fail', reason: expect.stringMatching(/localhost resolves to 127\.0\.0\.1, a loopback address/) })
      const v6 = await processorWith(false)(callbackJob('http://[::1]:9/x'), job)
      expect(v6).toMatchObject({ status: 'fail', reason: expect.stringMatching(/::1 is a loopback address/) })
      expect(e.received).toEqual([])
    } finally {
      await e.close()
    }
  })

  it("connects to the address the socket's lookup answers, and only once it is checked", async () => {
    const e = await endpoint([204])
    try {
      const url = e.url.replace('127.0.0.1', 'localhost')
      // Allowed: the one address the lookup answered is the one the POST reached.
      const allowed = answering('127.0.0.1')
      expect(await processorWith(true, allowed.resolve)(callbackJob(url), job)).toMatchObject({ status: 'ok' })
      expect(allowed.calls).toEqual(['localhost'])
      expect(e.received).toHaveLength(1)
      // Refused on the answer at delivery (whatever the name answered when the export was requested): never connected.
      const refused = answering('127.0.0.1')
      expect(await processorWith(false, refused.resolve)(callbackJob(url), job)).toEqual({
        status: 'fail',
        reason: `callback to ${url} not delivered: localhost resolves to 127.0.0.1, a loopback address; callbacks go to public addresses only unless CALLBACK_ALLOW_PRIVATE is true`,
      })
      expect(refused.calls).toEqual(['localhost'])
      expect(e.received).toHaveLength(1)
    } finally {
      await e.close()
    }
  })

  it('fails without retry, and without a socket reaching them, the addresses that are never a callback target', async () => {
    connects.length = 0
    for (const [url, allowPrivate, reason] of [
      ['http://100.64.0.1/', false, /100\.64\.0\.1 is in the shared address space of RFC 6598; callbacks go to public addresses only/],
      ['http://100.100.100.200/latest/meta-data', false, /100\.100\.100\.200 is in the shared address space/],
      ['http://224.0.0.1:9/x', true, /224\.0\.0\.1 is a multicast address; no callback can be delivered there/],
      ['http://255.255.255.255:9/x', true, /255\.255\.255\.255 is the broadcast address/],
      ['http://198.18.0.1/', true, /198\.18\.0\.1 is in a reserved, benchmarking or documentation range/],
      ['http://[64:ff9b::a00:1]/', true, /is a NAT64 address/],
      ['http://[2002:a00:1::1]/', true, /is a 6to4 address/],
      ['http://[::ffff:169.254.169.254]/', false, /is a link-local address/],
    ] as const) {
      expect(await processorWith(allowPrivate)(callbackJob(url), job), url).toMatchObject({ status: 'fail', reason: expect.stringMatching(reason) })
    }
    // A name answering such an address is refused in the socket's lookup, before any connection.
    const multicast = answering('224.0.0.1')
    expect(await processorWith(true, multicast.resolve)(callbackJob('http://localhost:9/x'), job)).toMatchObject({
      status: 'fail',
      reason: expect.stringMatching(/localhost resolves to 224\.0\.0\.1, a multicast address/),
    })
    expect(multicast.calls).toEqual(['localhost'])
    // Only the name reached a socket (which never connected): no refused address did.
    expect(connects).toEqual(['localhost'])
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

  it('fails a broadcast endpoint on its first attempt: no retry with backoff', async () => {
    const ws = await env.workspace()
    await submitRequest({ queues: env.ctx.queues, tracker: env.ctx.tracker }, {
      workspaceId: ws.id,
      requestId: 'cb-broadcast',
      jobs: [{ name: 'deliverCallback', data: { workspaceId: ws.id, requestId: 'cb-broadcast', exportId: 'x', url: 'http://255.255.255.255:9/', body: { success: true } } }],
    })
    const done = await env.waitForRequest(ws.key, 'cb-broadcast', 30_000)
    expect(done).toEqual({ request_id: 'cb-broadcast', status: 'failed', errors: [{ message: expect.stringMatching(/255\.255\.255\.255 is the broadcast address; no callback can be delivered there/) }] })
    const deliveries = await env.ctx.queues.get('callback').getJobs(['completed', 'failed', 'delayed', 'waiting'])
    expect(deliveries.filter((j) => j.data.requestId === 'cb-broadcast').map((j) => j.attemptsMade)).toEqual([1])
  })
})
