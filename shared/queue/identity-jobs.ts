import { z } from 'zod'
import { IdentifierByKind } from '../domain/identifiers.js'
import { Prioritization } from '../domain/prioritization.js'

/** The one identity queue: its jobs run one at a time, in acceptance order. */
export const IDENTITY_QUEUE = 'identity'

/**
 * How an identity request names one user: an identifier (shared/domain/identifiers.ts). Email and
 * phone may name several users, so they carry the prioritization that picks one (interface.md 4.2).
 */
export const IdentityTarget = z.discriminatedUnion('kind', [
  IdentifierByKind.external_id,
  IdentifierByKind.user_alias,
  IdentifierByKind.service_id,
  IdentifierByKind.email.extend({ prioritization: Prioritization }),
  IdentifierByKind.phone.extend({ prioritization: Prioritization }),
])
export type IdentityTarget = z.infer<typeof IdentityTarget>

/** One element of /users/merge `merge_updates`: `toMerge` is folded into `toKeep` and removed. */
export const MergeOperation = z.object({
  type: z.literal('merge'),
  index: z.number().int(),
  toMerge: IdentityTarget,
  toKeep: IdentityTarget,
})
export type MergeOperation = z.infer<typeof MergeOperation>

/** One element of /users/identify: the user named by `user` (an alias or an email) gets `externalId`. */
export const IdentifyOperation = z.object({
  type: z.literal('identify'),
  inputArray: z.enum(['aliases_to_identify', 'emails_to_identify']),
  index: z.number().int(),
  externalId: z.string(),
  user: IdentityTarget,
})
export type IdentifyOperation = z.infer<typeof IdentifyOperation>

/** One identifier of /users/delete. */
export const DeleteOperation = z.object({
  type: z.literal('delete'),
  inputArray: z.enum(['external_ids', 'user_aliases', 'service_ids', 'email_addresses']),
  index: z.number().int(),
  user: IdentityTarget,
})
export type DeleteOperation = z.infer<typeof DeleteOperation>

export const IdentityOperation = z.discriminatedUnion('type', [MergeOperation, IdentifyOperation, DeleteOperation])
export type IdentityOperation = z.infer<typeof IdentityOperation>

/**
 * The identity changes (merges, identifications or deletes) of one request, one job per request:
 * applied in order, each reporting its own non-fatal errors.
 */
export const IdentityJob = z.object({
  workspaceId: z.string(),
  requestId: z.string(),
  /** Acceptance time (ms): track work accepted before it is applied first. */
  acceptedAt: z.number(),
  operations: z.array(IdentityOperation).min(1),
})
export type IdentityJob = z.infer<typeof IdentityJob>
