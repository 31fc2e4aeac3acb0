import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import { ApiError } from './errors.js'

/**
 * Operator changes and the caches of API processes (docs/operations.md, "Caches").
 *
 * One Redis key holds the operator generation: a random token that every writer of cached state
 * replaces after its Postgres commit and before it answers. Each cache entry is tagged with the
 * generation the process had seen before it read Postgres, and every API-key request compares that
 * tag with the key in the same Redis script that counts its rate limit. A request sent after a
 * writer's answer reaches Redis after the token changed, so a stale tag cannot pass: the process
 * reads again and decides again. Tokens are random, never counters, so a Redis that lost its data
 * cannot bring an old value back.
 */
export function generationKey(prefix: string): string {
  return `${prefix}:operator:generation`
}

/** What the script returns for a missing key (a fresh Redis): also a generation, equal only to itself. */
export const NO_GENERATION = ''
/** A process's generation before it has read one: equal to no value the key can hold. */
const UNKNOWN = '?'

/**
 * Entries older than this are read again even when no change was announced: the bound when a
 * writer died between its commit and its announcement (it never answered, yet its change is saved).
 */
export const CACHE_MAX_AGE_MS = 60_000

/** One process's view of the operator generation; caches drop their entries when it moves. */
export class OperatorGeneration {
  private seen = UNKNOWN
  private readonly onChange: (() => void)[] = []

  constructor(
    private readonly redis: Redis,
    readonly prefix: string,
  ) {}

  get key(): string {
    return generationKey(this.prefix)
  }

  /** The generation last seen in Redis; entries read from Postgres now are tagged with it. */
  get current(): string {
    return this.seen
  }

  /** Records a generation read from Redis; true when it differs from the one this process held. */
  observe(generation: string): boolean {
    if (generation === this.seen) return false
    this.seen = generation
    for (const f of this.onChange) f()
    return true
  }

  /** One GET: for decisions that make no other Redis call (refusing an unknown key). */
  async isCurrent(tag: string): Promise<boolean> {
    const generation = (await this.redis.get(this.key)) ?? NO_GENERATION
    this.observe(generation)
    return generation === tag
  }

  subscribe(f: () => void): void {
    this.onChange.push(f)
  }

  /**
   * The writers' side, after the Postgres commit and before answering the operator: a new token,
   * which this process adopts at once (what it reads from now on includes the commit).
   */
  async announce(): Promise<void> {
    const generation = randomBytes(12).toString('base64url')
    try {
      await this.redis.set(this.key, generation)
    } catch {
      throw new ApiError(
        503,
        'change_not_announced',
        `the change is saved, but Redis is unavailable to announce it: API processes apply it within ${CACHE_MAX_AGE_MS / 1000} s at the latest`,
      )
    }
    this.observe(generation)
  }
}

/** How many times a request reads cached state again because operator changes kept moving under it. */
export const MAX_REREADS = 5

export function unsettled(): ApiError {
  return new ApiError(503, 'settings_changing', 'operator settings are changing right now; retry the request')
}

export interface Tagged<V> {
  value: V
  /** The generation seen before the value was read: the value is current while Redis holds it. */
  generation: string
}

/**
 * An in-process cache whose entries are tagged with the generation seen before they were loaded.
 * Concurrent misses for one key share one load; a failed load is not kept.
 */
export class CoherentCache<V> {
  private readonly entries = new Map<string, { generation: string; at: number; value: Promise<V> }>()

  constructor(
    private readonly generation: OperatorGeneration,
    private readonly load: (key: string) => Promise<V>,
    private readonly maxEntries = 10_000,
  ) {
    generation.subscribe(() => this.entries.clear())
  }

  async get(key: string): Promise<Tagged<V>> {
    const now = Date.now()
    const tag = this.generation.current
    let hit = this.entries.get(key)
    if (!hit || hit.generation !== tag || now - hit.at > CACHE_MAX_AGE_MS) {
      if (this.entries.size >= this.maxEntries) this.entries.clear()
      const entry = { generation: tag, at: now, value: this.load(key) }
      this.entries.set(key, entry)
      entry.value.catch(() => {
        if (this.entries.get(key) === entry) this.entries.delete(key)
      })
      hit = entry
    }
    return { value: await hit.value, generation: hit.generation }
  }
}
