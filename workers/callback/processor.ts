import { lookup } from 'node:dns/promises'
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { isIP } from 'node:net'
import { RetryableError } from '../../shared/errors.js'
import type { WorkerDeps } from '../deps.js'
import { fail, ok, type Processor } from '../runner.js'
import { isPrivateAddress } from './private-addresses.js'

const TIMEOUT_MS = 10_000

/** A callback that cannot be delivered whatever the number of attempts. */
class Undeliverable extends Error {}

/**
 * POSTs the export's announcement to the customer's endpoint. The host is resolved once and the
 * connection pinned to the checked address, so a DNS answer cannot swap in a private address
 * between the check and the request. 5xx, 429, timeouts and network errors are retried by BullMQ
 * with backoff; a malformed URL, a refused address, a redirect or another 4xx fail the job.
 */
export function createCallbackProcessor(deps: WorkerDeps): Processor<'deliverCallback'> {
  return async (data) => {
    try {
      const target = parseTarget(data.url)
      const address = await resolveAllowed(target.hostname, deps.config.CALLBACK_ALLOW_PRIVATE)
      await post(target, address, data.body)
      return ok()
    } catch (e) {
      if (e instanceof Undeliverable) return fail(`callback to ${data.url} not delivered: ${e.message}`)
      throw e
    }
  }
}

function parseTarget(raw: string): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new Undeliverable('malformed URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Undeliverable(`unsupported scheme ${url.protocol}`)
  return url
}

interface ResolvedAddress {
  address: string
  family: number
}

async function resolveAllowed(hostname: string, allowPrivate: boolean): Promise<ResolvedAddress> {
  const host = hostname.replace(/^\[|\]$/g, '')
  const family = isIP(host)
  const addresses = family ? [{ address: host, family }] : await resolve(host)
  if (!allowPrivate) {
    const refused = addresses.find((a) => isPrivateAddress(a.address))
    if (refused) throw new Undeliverable(`${host} resolves to the private or loopback address ${refused.address}`)
  }
  return addresses[0]
}

async function resolve(host: string): Promise<ResolvedAddress[]> {
  try {
    return await lookup(host, { all: true })
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw new Undeliverable(`host ${host} does not resolve`)
    throw new RetryableError(`resolving ${host}: ${(e as Error).message}`, e)
  }
}

/** One POST with a deadline; resolves with the status of a 2xx answer. */
function post(url: URL, pinned: ResolvedAddress, body: unknown): Promise<number> {
  const payload = Buffer.from(JSON.stringify(body))
  const pinnedLookup: LookupFunction = (_host, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, [pinned])
    else callback(null, pinned.address, pinned.family)
  }
  const transport = url.protocol === 'https:' ? https : http
  return new Promise((resolvePost, reject) => {
    const req = transport.request(
      url,
      {
        method: 'POST',
        // A fresh connection each time: a pooled socket would skip the pinned, checked address.
        agent: false,
        lookup: pinnedLookup,
        timeout: TIMEOUT_MS,
        headers: { 'content-type': 'application/json', 'content-length': payload.length, 'user-agent': 'userdata-service-export-callback' },
      },
      (res) => {
        res.resume()
        const status = res.statusCode ?? 0
        if (status >= 200 && status < 300) return resolvePost(status)
        if (status >= 500 || status === 429) return reject(new RetryableError(`callback endpoint answered ${status}`))
        reject(new Undeliverable(status >= 300 && status < 400 ? `endpoint answered a redirect (${status}); redirects are not followed` : `endpoint answered ${status}`))
      },
    )
    req.on('timeout', () => req.destroy(new RetryableError(`callback endpoint did not answer within ${TIMEOUT_MS} ms`)))
    req.on('error', (e) => reject(e instanceof RetryableError ? e : new RetryableError(`callback request failed: ${e.message}`, e)))
    req.end(payload)
  })
}
