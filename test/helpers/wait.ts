export { setTimeout as sleep } from 'node:timers/promises'

/**
 * Polls `read` every `everyMs` until `done` holds for its value, which it answers; fails naming
 * `what` and the last value read after the timeout.
 */
export async function until<T>(what: string, read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${shown(value)})`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

function shown(value: unknown): string {
  try {
    return String(JSON.stringify(value)).slice(0, 200)
  } catch {
    return String(value)
  }
}
