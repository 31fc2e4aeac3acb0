import type { Redis } from 'ioredis'
import { redisScript } from '../redis-script.js'
import { trackQueueName } from './track-jobs.js'

/**
 * How track work is spread over partition queues: `partitions` queues of one generation. A change
 * starts a new generation on queues of its own; the previous one is drained first. Requests
 * accepted before the change apply on the old queues, those after it on the new ones, which start
 * only once every job of the old generation has applied: so each user's work keeps its order
 * across the change (a user's old and new partition may differ), nothing is moved between queues,
 * and nothing is refused meanwhile. The layout lives in Redis beside the queues, one per deployment.
 */
export interface TrackLayout {
  generation: number
  partitions: number
  /** The generation being drained, until its last job has applied. */
  previous?: { generation: number; partitions: number }
}

/** A generation's partition queue: `track-<p>` for the first, `track-g<generation>-<p>` after. */
export const trackQueueOf = (generation: number, partition: number) => (generation === 0 ? trackQueueName(partition) : `track-g${generation}-${partition}`)

/** The generation a track queue belongs to. */
export function generationOf(queue: string): number {
  const m = /^track-g(\d+)-\d+$/.exec(queue)
  return m ? Number(m[1]) : 0
}

/** The queues work may be in: the current generation's, then the one being drained. */
export function trackQueuesOf(layout: TrackLayout): string[] {
  const of = (g: number, n: number) => Array.from({ length: n }, (_, p) => trackQueueOf(g, p))
  return [...of(layout.generation, layout.partitions), ...(layout.previous ? of(layout.previous.generation, layout.previous.partitions) : [])]
}

export const trackLayoutKey = (prefix: string) => `${prefix}:track-layout`
/** The layout's count of a generation's track jobs not reported yet (request-tracker.ts keeps it). */
export const openJobsField = (generation: number) => `open:g${generation}`

/** KEYS: the layout. ARGV: the partitions of a new deployment. Answers the layout's fields. */
const READ = `
redis.call('HSETNX', KEYS[1], 'generation', 0)
redis.call('HSETNX', KEYS[1], 'partitions', ARGV[1])
return redis.call('HGETALL', KEYS[1])`

/** KEYS: the layout. ARGV: the new partition count. Answers 0 while a change is still draining, else the new generation. */
const CHANGE = `
if redis.call('HEXISTS', KEYS[1], 'previous_generation') == 1 then return 0 end
local g = tonumber(redis.call('HGET', KEYS[1], 'generation'))
local n = redis.call('HGET', KEYS[1], 'partitions')
redis.call('HSET', KEYS[1], 'previous_generation', g, 'previous_partitions', n, 'generation', g + 1, 'partitions', ARGV[1])
return g + 1`

/** KEYS: the layout. ARGV: the generation drained. Ends its drain, once. */
const SETTLE = `
if redis.call('HGET', KEYS[1], 'previous_generation') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'previous_generation', 'previous_partitions', 'open:g' .. ARGV[1])
return 1`

const readScript = redisScript(READ)
const changeScript = redisScript(CHANGE)
const settleScript = redisScript(SETTLE)

function parse(flat: string[]): TrackLayout {
  const h: Record<string, string> = {}
  for (let i = 0; i < flat.length; i += 2) h[flat[i]] = flat[i + 1]
  const layout: TrackLayout = { generation: Number(h.generation), partitions: Number(h.partitions) }
  if (h.previous_generation !== undefined) layout.previous = { generation: Number(h.previous_generation), partitions: Number(h.previous_partitions) }
  return layout
}

/** How often a process looks at the layout (a change made elsewhere reaches it within this). */
const REFRESH_MS = 1_000

/**
 * A process's view of the layout: read at start, looked at again every second and whenever a
 * request finds it stale (the request tracker refuses a request routed for an old generation).
 */
export class TrackLayouts {
  private layout: TrackLayout
  private timer?: NodeJS.Timeout
  private readonly listeners = new Set<(l: TrackLayout) => void>()

  private constructor(private readonly redis: Redis, private readonly prefix: string, private readonly initialPartitions: number, first: TrackLayout) {
    this.layout = first
  }

  /** `initialPartitions`: TRACK_PARTITIONS, the layout of a deployment whose Redis holds none yet. */
  static async open(redis: Redis, prefix: string, initialPartitions: number): Promise<TrackLayouts> {
    const first = parse((await readScript(redis, [trackLayoutKey(prefix)], [initialPartitions])) as string[])
    const layouts = new TrackLayouts(redis, prefix, initialPartitions, first)
    layouts.timer = setInterval(() => void layouts.refresh().catch(() => {}), REFRESH_MS)
    layouts.timer.unref()
    return layouts
  }

  current(): TrackLayout {
    return this.layout
  }

  /** Reads the layout again; listeners hear of a change. */
  async refresh(): Promise<TrackLayout> {
    const next = parse((await readScript(this.redis, [trackLayoutKey(this.prefix)], [this.initialPartitions])) as string[])
    const changed = next.generation !== this.layout.generation || (next.previous === undefined) !== (this.layout.previous === undefined)
    this.layout = next
    if (changed) for (const l of this.listeners) l(next)
    return next
  }

  onChange(listener: (l: TrackLayout) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Starts a change to `partitions` queues; undefined while the previous change still drains. */
  async change(partitions: number): Promise<TrackLayout | undefined> {
    const generation = Number(await changeScript(this.redis, [trackLayoutKey(this.prefix)], [partitions]))
    if (generation === 0) return undefined
    return this.refresh()
  }

  /** Ends the drain of `generation` (its queues are empty and its jobs all reported). */
  async settle(generation: number): Promise<void> {
    await settleScript(this.redis, [trackLayoutKey(this.prefix)], [generation])
    await this.refresh()
  }

  close(): void {
    clearInterval(this.timer)
    this.listeners.clear()
  }
}
