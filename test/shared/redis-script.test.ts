import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { redisScript } from '../../shared/redis-script.js'

let redis: Redis
beforeAll(() => {
  redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null })
})
afterAll(() => redis.disconnect())

/** What fn writes to the Redis socket, one string per write. */
async function writtenWhile(fn: () => Promise<unknown>): Promise<string[]> {
  const stream = (redis as unknown as { stream: { write: (chunk: unknown, ...rest: unknown[]) => boolean } }).stream
  const write = stream.write
  const written: string[] = []
  stream.write = (chunk: unknown, ...rest: unknown[]) => {
    written.push(String(chunk))
    return write.call(stream, chunk, ...rest)
  }
  try {
    await fn()
  } finally {
    stream.write = write
  }
  return written
}

it('sends the script text only when Redis does not know it, and its SHA otherwise', async () => {
  // A text of its own: no other test has loaded it, so Redis does not know it yet.
  const marker = randomBytes(6).toString('hex')
  const script = redisScript(`-- ${marker}\nreturn {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}`)
  await redis.ping() // connected: the socket exists

  let first: unknown
  const firstWrites = await writtenWhile(async () => void (first = await script(redis, ['k'], ['a', 41])))
  expect(first).toEqual(['k', 'a', 42])
  // EVALSHA answered NOSCRIPT, then EVAL with the text.
  expect(firstWrites.length).toBe(2)
  expect(firstWrites[0]).toContain('evalsha')
  expect(firstWrites[1]).toContain(marker)

  let second: unknown
  const secondWrites = await writtenWhile(async () => void (second = await script(redis, ['k2'], ['b', 1])))
  expect(second).toEqual(['k2', 'b', 2])
  expect(secondWrites.length).toBe(1)
  expect(secondWrites[0]).toContain('evalsha')
  expect(secondWrites[0]).not.toContain(marker)
})
