import http from 'node:http'
import https from 'node:https'
import { RetryableError } from '../../shared/errors.js'
import { CallbackTargetRefused, checkedLookup, literalTargetRefusal, type ResolveHost } from '../../shared/net/callback-target.js'
import type { WorkerDeps } from '../deps.js'
import { fail, ok, type Processor } from '../runner.js'

const TIMEOUT_MS = 10_000

/** A callback that cannot be delivered whatever the number of attempts. */
class Undeliverable extends Error {}

/**
 * POSTs the export's announcement to the customer's endpoint. The socket's own lookup resolves
 * the host and checks every address (shared/net/callback-target.ts), so the address connected to
 * is the address checked and a name answering differently later cannot slip a private address
 * in; an IP literal, for which a socket does no lookup, is checked before the request. 5xx, 429,
 * timeouts and network errors are retried by BullMQ with backoff; a malformed URL, a refused
 * address, a name that does not resolve, a redirect or another 4xx fail the job.
 */
export function createCallbackProcessor(deps: WorkerDeps, opts: { resolve?: ResolveHost } = {}): Processor<'deliverCallback'> {
  const allowPrivate = deps.config.CALLBACK_ALLOW_PRIVATE
  const lookup = checkedLookup({ allowPrivate, resolve: opts.resolve })
  return async (data) => {
    try {
      const target = parseTarget(data.url)
      const refused = literalTargetRefusal(target, allowPrivate)
      if (refused) throw new Undeliverable(refused)
      await post(target, lookup, data.body)
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

/** One POST with a deadline; resolves with the status of a 2xx answer. */
function post(url: URL, lookup: ReturnType<typeof checkedLookup>, body: unknown): Promise<number> {
  const payload = Buffer.from(JSON.stringify(body))
  const transport = url.protocol === 'https:' ? https : http
  return new Promise((resolvePost, reject) => {
    const req = transport.request(
      url,
      {
        method: 'POST',
        // A fresh connection each time: a pooled socket would skip the checked lookup.
        agent: false,
        lookup,
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
    req.on('error', (e) => {
      if (e instanceof CallbackTargetRefused) return reject(new Undeliverable(e.message))
      reject(e instanceof RetryableError ? e : new RetryableError(`callback request failed: ${e.message}`, e))
    })
    req.end(payload)
  })
}
