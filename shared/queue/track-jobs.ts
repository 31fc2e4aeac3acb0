import { z } from 'zod'
import { IdentifierByKind } from '../domain/identifiers.js'
import { AttributeOp, EventOp, PurchaseOp } from '../domain/track-operations.js'

/** Track work is spread over partition queues `track-0..N-1`, each one job at a time. */
export const trackQueueName = (partition: number) => `track-${partition}`
export const isTrackQueue = (name: string) => name.startsWith('track-')

/**
 * An occurrence's id in the event history, fixed at acceptance: its request, kind and position
 * in the request, so a replayed job writes the same rows. Derived, not carried: a tenth less
 * payload to write to Redis and parse again.
 */
export const eventIdOf = (requestId: string, kind: 'event' | 'purchase', index: number) => `${requestId}:${kind === 'event' ? 'e' : 'p'}:${index}`

/** A subscription-group state set by /subscription/status/set for one user key. */
export const SubscriptionChange = z.object({
  key: z.discriminatedUnion('kind', [IdentifierByKind.external_id, IdentifierByKind.email, IdentifierByKind.phone]),
  subscription_group_id: z.string(),
  subscription_state: z.enum(['subscribed', 'unsubscribed']),
})
export type SubscriptionChange = z.infer<typeof SubscriptionChange>

/** An email subscription state set by /email/status for an address. */
export const EmailStateChange = z.object({
  email: z.string(),
  subscription_state: z.enum(['opted_in', 'subscribed', 'unsubscribed']),
})
export type EmailStateChange = z.infer<typeof EmailStateChange>

/**
 * One partition's share of an accepted request: everything in it names users that hash to this
 * partition, and is applied in order: attributes, events, purchases, then subscription changes.
 */
export const TrackJob = z.object({
  workspaceId: z.string(),
  requestId: z.string(),
  attributes: z.array(AttributeOp).default([]),
  events: z.array(EventOp).default([]),
  purchases: z.array(PurchaseOp).default([]),
  subscriptionChanges: z.array(SubscriptionChange).default([]),
  emailStateChanges: z.array(EmailStateChange).default([]),
})
export type TrackJob = z.infer<typeof TrackJob>
