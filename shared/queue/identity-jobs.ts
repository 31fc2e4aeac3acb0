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

/** One element of /users/identify: the user named by `user` (an alias, an email or a phone) gets `externalId`. */
export const IdentifyOperation = z.object({
  type: z.literal('identify'),
  inputArray: z.enum(['aliases_to_identify', 'emails_to_identify', 'phone_numbers_to_identify']),
  index: z.number().int(),
  externalId: z.string(),
  user: IdentityTarget,
})
export type IdentifyOperation = z.infer<typeof IdentifyOperation>

/** One identifier of /users/delete (`braze_ids` is the reference's name of `service_ids`). */
export const DeleteOperation = z.object({
  type: z.literal('delete'),
  inputArray: z.enum(['external_ids', 'user_aliases', 'service_ids', 'braze_ids', 'email_addresses']),
  index: z.number().int(),
  user: IdentityTarget,
})
export type DeleteOperation = z.infer<typeof DeleteOperation>

const AliasFields = { alias_name: z.string(), alias_label: z.string() }

/** One element of /users/alias/new naming an external id: the alias is added to that user. */
export const AliasNewOperation = z.object({
  type: z.literal('alias_new'),
  index: z.number().int(),
  externalId: z.string(),
  alias: z.object(AliasFields),
})
export type AliasNewOperation = z.infer<typeof AliasNewOperation>

/** One element of /users/alias/update: the alias keeps its label and owner and takes a new name. */
export const AliasUpdateOperation = z.object({
  type: z.literal('alias_update'),
  index: z.number().int(),
  alias_label: z.string(),
  old_alias_name: z.string(),
  new_alias_name: z.string(),
})
export type AliasUpdateOperation = z.infer<typeof AliasUpdateOperation>

/** One element of /users/external_ids/rename: the user's primary id becomes `newExternalId`; the old one is deprecated. */
export const RenameExternalIdOperation = z.object({
  type: z.literal('rename_external_id'),
  index: z.number().int(),
  currentExternalId: z.string(),
  newExternalId: z.string(),
})
export type RenameExternalIdOperation = z.infer<typeof RenameExternalIdOperation>

/** One element of /users/external_ids/remove: a deprecated external id stops naming its user. */
export const RemoveExternalIdOperation = z.object({
  type: z.literal('remove_external_id'),
  index: z.number().int(),
  externalId: z.string(),
})
export type RemoveExternalIdOperation = z.infer<typeof RemoveExternalIdOperation>

export const IdentityOperation = z.discriminatedUnion('type', [
  MergeOperation,
  IdentifyOperation,
  DeleteOperation,
  AliasNewOperation,
  AliasUpdateOperation,
  RenameExternalIdOperation,
  RemoveExternalIdOperation,
])
export type IdentityOperation = z.infer<typeof IdentityOperation>

/**
 * The identity changes (merges, identifications, deletes, alias and external id changes) of one request, one job per request:
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
