import { identifierKey, partitionOf, partitionOfKey, type Identifier } from '../domain/identifiers.js'
import { pushTokensOf, type AttributeOp, type EventOp, type PurchaseOp } from '../domain/track-operations.js'
import type { QueuedJob } from './jobs.js'
import type { EmailStateChange, SubscriptionChange, TrackJob } from './track-jobs.js'

/** The request a producer splits into track jobs. */
interface TrackRequest {
  workspaceId: string
  requestId: string
}

/**
 * One track job per partition a request touches. Every producer of track work places each item
 * on the partition of the user it names, so that work on one user applies in acceptance order.
 */
class TrackJobBuilder {
  private readonly jobs = new Map<number, TrackJob>()

  constructor(private readonly request: TrackRequest) {}

  /** The job of a partition, started empty on first use; items keep the order they are pushed in. */
  on(partition: number): TrackJob {
    let job = this.jobs.get(partition)
    if (!job) {
      job = { ...this.request, attributes: [], events: [], purchases: [], subscriptionChanges: [], emailStateChanges: [] }
      this.jobs.set(partition, job)
    }
    return job
  }

  queued(): QueuedJob[] {
    return [...this.jobs].map(([partition, data]) => ({ name: 'applyTrackBatch', partition, data }))
  }
}

/** Where a linked group goes: the first attributes object naming it, one named by external_id, user_alias or service_id first. */
interface Anchor {
  partition: number
  primary: boolean
  order: number
}

const better = (a: Anchor, b: Anchor) => (a.primary !== b.primary ? a.primary : a.order < b.order)

/**
 * Identifiers one request links to one user (union-find over identifier keys): an attributes
 * object links its identifier with the email and phone it sets. A group goes to the partition of
 * its anchor. Two groups anchored by different primary identifiers (external_id, user_alias,
 * service_id) are never merged, so a primary identifier always keeps its own partition (and its
 * order with other requests); only objects named by a linked email or phone move.
 */
class LinkedIdentifiers {
  private readonly parent = new Map<string, string>()
  private readonly anchor = new Map<string, Anchor>()

  private find(key: string): string {
    let root = key
    while (this.parent.has(root)) root = this.parent.get(root)!
    // Path compression: later look-ups of the same key are one step.
    for (let k = key; k !== root; ) {
      const next = this.parent.get(k)!
      this.parent.set(k, root)
      k = next
    }
    return root
  }

  anchorAt(key: string, anchor: Anchor): void {
    const root = this.find(key)
    const current = this.anchor.get(root)
    if (!current || better(anchor, current)) this.anchor.set(root, anchor)
  }

  link(a: string, b: string): void {
    const [ra, rb] = [this.find(a), this.find(b)]
    if (ra === rb) return
    const [aa, ab] = [this.anchor.get(ra), this.anchor.get(rb)]
    if (aa?.primary && ab?.primary) return
    this.parent.set(rb, ra)
    this.anchor.delete(rb)
    if (ab && (!aa || better(ab, aa))) this.anchor.set(ra, ab)
  }

  /** The partition of the key's group, if an attributes object anchors it. */
  partitionOf(key: string): number | undefined {
    return this.anchor.get(this.find(key))?.partition
  }
}

const isPrimary = (id: Identifier) => id.kind === 'external_id' || id.kind === 'user_alias' || id.kind === 'service_id'

/** A push-token import names no user: its anonymous profile goes by its first token. */
function pushTokenKeyOf(op: AttributeOp): string {
  const [first] = pushTokensOf(op)
  return `push_token:${first.app_id}\u0000${first.token}`
}

/** The jobs of a /users/track request: its objects split by partition, in request order inside each. */
export function trackRequestJobs(
  request: TrackRequest,
  ops: { attributes: AttributeOp[]; events: EventOp[]; purchases: PurchaseOp[] },
  partitions: number,
): QueuedJob[] {
  const jobs = new TrackJobBuilder(request)
  const linked = new LinkedIdentifiers()
  ops.attributes.forEach((a, order) => {
    if (a.identifier) linked.anchorAt(identifierKey(a.identifier), { partition: partitionOf(a.identifier, partitions), primary: isPrimary(a.identifier), order })
  })
  for (const a of ops.attributes) {
    if (!a.identifier) continue
    const key = identifierKey(a.identifier)
    if (typeof a.fields.email === 'string') linked.link(key, identifierKey({ kind: 'email', value: a.fields.email }))
    if (typeof a.fields.phone === 'string') linked.link(key, identifierKey({ kind: 'phone', value: a.fields.phone }))
  }
  const partitionOfUser = (id: Identifier) => linked.partitionOf(identifierKey(id)) ?? partitionOf(id, partitions)
  for (const a of ops.attributes) {
    const p = a.identifier ? partitionOfUser(a.identifier) : partitionOfKey(pushTokenKeyOf(a), partitions)
    jobs.on(p).attributes.push(a)
  }
  for (const e of ops.events) jobs.on(partitionOfUser(e.identifier)).events.push(e)
  for (const p of ops.purchases) jobs.on(partitionOfUser(p.identifier)).purchases.push(p)
  return jobs.queued()
}

/**
 * The jobs of subscription and email-state writes: on the track partitions of the user keys they
 * name, so they apply in acceptance order with /users/track requests naming the same keys.
 */
export function trackChangeJobs(
  request: TrackRequest,
  changes: { subscriptionChanges?: SubscriptionChange[]; emailStateChanges?: EmailStateChange[] },
  partitions: number,
): QueuedJob[] {
  const jobs = new TrackJobBuilder(request)
  for (const c of changes.subscriptionChanges ?? []) jobs.on(partitionOf(c.key, partitions)).subscriptionChanges.push(c)
  for (const c of changes.emailStateChanges ?? []) jobs.on(partitionOf({ kind: 'email', value: c.email }, partitions)).emailStateChanges.push(c)
  return jobs.queued()
}
