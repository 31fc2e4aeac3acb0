import { z } from 'zod'
import { isPlainObject } from '../../../shared/domain/attributes.js'
import { EmailAddress, normalizeEmail } from '../../../shared/domain/email.js'
import { PhoneNumber, toE164 } from '../../../shared/domain/phone.js'
import { Prioritization, prioritizationProblem, type Priority } from '../../../shared/domain/prioritization.js'
import { UserAlias } from '../../../shared/domain/track-validation.js'
import { badRequest } from '../../../shared/errors.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import { submitRequest, type QueuedJob } from '../../../shared/queue/jobs.js'
import type { DeleteOperation, IdentifyOperation, IdentityOperation, IdentityTarget, MergeOperation } from '../../../shared/queue/identity-jobs.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

/** Per-request limits of interface.md section 8. */
export const MAX_MERGE_UPDATES = 50
export const MAX_IDENTIFY = 50
export const MAX_DELETE = 50

/** The messages of interface.md section 7, byte for byte. */
const MERGE_NOT_ARRAY = "'merge_updates' must be an array of objects"
const MERGE_TOO_MANY = `a single request may not contain more than ${MAX_MERGE_UPDATES} merge updates`
const MERGE_BAD_IDENTIFIER =
  "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, or 'email' property that is a string"
const MERGE_EXTRA_KEYS = "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'"

const MERGE_KEYS = new Set(['identifier_to_merge', 'identifier_to_keep'])

function mergePrioritization(value: unknown, at: string): Priority[] {
  const problem = prioritizationProblem(value)
  if (problem) throw badRequest(`${at}.prioritization: ${problem}`)
  return value as Priority[]
}

/** One merge identifier: exactly one of external_id, user_alias, email, phone; email and phone carry a prioritization. */
function mergeIdentifier(raw: unknown, at: string): IdentityTarget {
  if (!isPlainObject(raw)) throw badRequest(MERGE_BAD_IDENTIFIER)
  const { prioritization, ...named } = raw
  const keys = Object.keys(named)
  if (keys.length !== 1) throw badRequest(MERGE_BAD_IDENTIFIER)
  const value = named[keys[0]]
  const byIdOrAlias = keys[0] === 'external_id' || keys[0] === 'user_alias'
  if (byIdOrAlias && prioritization !== undefined) throw badRequest(`${at}.prioritization: only email and phone identifiers take a prioritization`)
  switch (keys[0]) {
    case 'external_id':
      if (typeof value !== 'string' || value.length === 0) throw badRequest(MERGE_BAD_IDENTIFIER)
      return { kind: 'external_id', value }
    case 'user_alias': {
      const alias = UserAlias.safeParse(value)
      if (!alias.success) throw badRequest(MERGE_BAD_IDENTIFIER)
      return { kind: 'user_alias', ...alias.data }
    }
    case 'email':
      if (typeof value !== 'string' || value.trim().length === 0) throw badRequest(MERGE_BAD_IDENTIFIER)
      return { kind: 'email', value: normalizeEmail(value), prioritization: mergePrioritization(prioritization, at) }
    case 'phone': {
      const phone = typeof value === 'string' ? toE164(value) : undefined
      if (!phone) throw badRequest(`${at}.phone: must be a valid phone number with country code (E.164)`)
      return { kind: 'phone', value: phone, prioritization: mergePrioritization(prioritization, at) }
    }
    default:
      throw badRequest(MERGE_BAD_IDENTIFIER)
  }
}

/**
 * The shape of a /users/merge body, for the API document. The handler checks it by hand instead,
 * to answer the exact messages of interface.md section 7.
 */
const MergeIdentifier = z.union([
  z.object({ external_id: z.string().min(1) }).strict(),
  z.object({ user_alias: UserAlias }).strict(),
  z.object({ email: z.string().min(1), prioritization: Prioritization }).strict(),
  z.object({ phone: z.string().min(1).describe('a valid phone number with country code, stored in E.164'), prioritization: Prioritization }).strict(),
])
export const MergeBody = z.object({
  merge_updates: z.array(z.object({ identifier_to_merge: MergeIdentifier, identifier_to_keep: MergeIdentifier }).strict()).min(1).max(MAX_MERGE_UPDATES),
})

/** Checks /users/merge in the order the messages of section 7 suggest: shape, count, keys, identifiers. */
export function parseMergeUpdates(body: unknown): MergeOperation[] {
  const updates = isPlainObject(body) ? body.merge_updates : undefined
  if (!Array.isArray(updates) || !updates.every(isPlainObject)) throw badRequest(MERGE_NOT_ARRAY)
  if (updates.length > MAX_MERGE_UPDATES) throw badRequest(MERGE_TOO_MANY)
  if (updates.length === 0) throw badRequest("'merge_updates' must contain at least one merge update")
  return updates.map((update, index) => {
    if (Object.keys(update).some((k) => !MERGE_KEYS.has(k))) throw badRequest(MERGE_EXTRA_KEYS)
    return {
      type: 'merge',
      index,
      toMerge: mergeIdentifier(update.identifier_to_merge, `merge_updates[${index}].identifier_to_merge`),
      toKeep: mergeIdentifier(update.identifier_to_keep, `merge_updates[${index}].identifier_to_keep`),
    }
  })
}

export const ExternalId = z.string().min(1).max(512)

export const IdentifyBody = z
  .object({
    aliases_to_identify: z.array(z.object({ external_id: ExternalId, user_alias: UserAlias }).strict()).optional(),
    emails_to_identify: z.array(z.object({ external_id: ExternalId, email: EmailAddress, prioritization: Prioritization }).strict()).optional(),
    phone_numbers_to_identify: z
      .array(z.object({ external_id: ExternalId, phone: PhoneNumber.describe('a valid phone number with country code, stored in E.164'), prioritization: Prioritization }).strict())
      .optional(),
    // Accepted for compatibility; every call merges (interface.md 4.3 rule 1).
    merge_behavior: z.enum(['merge', 'none']).optional(),
  })
  .strict()

const IDENTIFY_LISTS = 'aliases_to_identify, emails_to_identify and phone_numbers_to_identify'

/** /users/identify: aliases, then emails, then phone numbers, each becoming one identify operation. */
export function parseIdentify(body: unknown): IdentifyOperation[] {
  const parsed = parseOr400(IdentifyBody, body ?? {})
  const aliases = parsed.aliases_to_identify ?? []
  const emails = parsed.emails_to_identify ?? []
  const phones = parsed.phone_numbers_to_identify ?? []
  const total = aliases.length + emails.length + phones.length
  if (total === 0) throw badRequest('aliases_to_identify, emails_to_identify or phone_numbers_to_identify must name at least one user')
  if (total > MAX_IDENTIFY) throw badRequest(`a single request may not identify more than ${MAX_IDENTIFY} users (${IDENTIFY_LISTS} together)`)
  return [
    ...aliases.map((a, index): IdentifyOperation => ({
      type: 'identify',
      inputArray: 'aliases_to_identify',
      index,
      externalId: a.external_id,
      user: { kind: 'user_alias', ...a.user_alias },
    })),
    ...emails.map((e, index): IdentifyOperation => ({
      type: 'identify',
      inputArray: 'emails_to_identify',
      index,
      externalId: e.external_id,
      user: { kind: 'email', value: e.email, prioritization: e.prioritization },
    })),
    ...phones.map((p, index): IdentifyOperation => ({
      type: 'identify',
      inputArray: 'phone_numbers_to_identify',
      index,
      externalId: p.external_id,
      user: { kind: 'phone', value: p.phone, prioritization: p.prioritization },
    })),
  ]
}

export const DeleteBody = z
  .object({
    external_ids: z.array(ExternalId).optional(),
    user_aliases: z.array(UserAlias).optional(),
    service_ids: z.array(z.string().min(1).max(512)).optional(),
    // The reference's name of the service's own profile ids (interface.md writes it service_id).
    braze_ids: z.array(z.string().min(1).max(512)).optional(),
    email_addresses: z.array(z.object({ email: EmailAddress, prioritization: Prioritization }).strict()).optional(),
  })
  .strict()

const DELETE_LISTS = ['external_ids', 'user_aliases', 'service_ids', 'braze_ids', 'email_addresses'] as const

function deleteTargets(body: z.infer<typeof DeleteBody>): { inputArray: DeleteOperation['inputArray']; user: IdentityTarget }[] {
  if (body.external_ids) return body.external_ids.map((value) => ({ inputArray: 'external_ids', user: { kind: 'external_id', value } }))
  if (body.user_aliases) return body.user_aliases.map((a) => ({ inputArray: 'user_aliases', user: { kind: 'user_alias', ...a } }))
  if (body.service_ids) return body.service_ids.map((value) => ({ inputArray: 'service_ids', user: { kind: 'service_id', value } }))
  if (body.braze_ids) return body.braze_ids.map((value) => ({ inputArray: 'braze_ids', user: { kind: 'service_id', value } }))
  return (body.email_addresses ?? []).map((e) => ({
    inputArray: 'email_addresses',
    user: { kind: 'email', value: e.email, prioritization: e.prioritization },
  }))
}

/** /users/delete: one kind of identifier list, at most 50 identifiers; a repeated identifier is deleted once. */
export function parseDelete(body: unknown): DeleteOperation[] {
  const parsed = parseOr400(DeleteBody, body ?? {})
  const lists = DELETE_LISTS.filter((k) => parsed[k] !== undefined)
  if (lists.length > 1) {
    throw badRequest(`a request carries one kind of identifier list: send only one of ${DELETE_LISTS.join(', ')} (got ${lists.join(', ')})`)
  }
  const targets = deleteTargets(parsed)
  if (targets.length === 0) throw badRequest(`name at least one user to delete in one of ${DELETE_LISTS.join(', ')}`)
  if (targets.length > MAX_DELETE) throw badRequest(`a single request may not contain more than ${MAX_DELETE} identifiers to delete`)
  const seen = new Set<string>()
  const ops: DeleteOperation[] = []
  targets.forEach((t, index) => {
    const key = JSON.stringify(t.user)
    if (seen.has(key)) return
    seen.add(key)
    ops.push({ type: 'delete', inputArray: t.inputArray, index, user: t.user })
  })
  return ops
}

/** Blocked ids for /users/identify, and the queues. */
export type IdentityDeps = Pick<ApiDeps, 'producer' | 'workspaces'>

/**
 * Queues the request's operations as one identity job (the worker applies them in order, and
 * batches the jobs waiting behind it); `acceptedAt` lets it apply earlier track work first.
 */
export async function submitOperations(
  deps: Pick<IdentityDeps, 'producer'>,
  locals: { workspaceId: string; requestId: string },
  operations: IdentityOperation[],
  /** Track work of the same request, routed for the layout in force. */
  trackJobs: (layout: TrackLayout) => QueuedJob[] = () => [],
) {
  const jobs: QueuedJob[] = operations.length
    ? [{ name: 'applyIdentityChange', data: { workspaceId: locals.workspaceId, requestId: locals.requestId, acceptedAt: Date.now(), operations } }]
    : []
  await submitRequest(deps.producer, { ...locals, jobs: (layout) => [...trackJobs(layout), ...jobs] })
}

const merge: ApiRoute<IdentityDeps> = {
  method: 'post',
  path: '/users/merge',
  summary: 'Merge one user into another',
  auth: 'api_key',
  permission: 'users.merge',
  write: true,
  body: MergeBody,
  responses: { 202: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    const operations = parseMergeUpdates(req.body)
    await submitOperations(deps, { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }, operations)
    res.status(202).json({ message: 'success' })
  },
}

const identify: ApiRoute<IdentityDeps> = {
  method: 'post',
  path: '/users/identify',
  summary: 'Identify alias-only, email-only or phone-only users with an external id (merging into the user who has it)',
  auth: 'api_key',
  permission: 'users.identify',
  write: true,
  body: IdentifyBody,
  responses: { 201: '`{aliases_processed, message: "success"}`' },
  handle: async (req, res, deps) => {
    const operations = parseIdentify(req.body)
    const workspaceId = res.locals.auth!.workspaceId
    const externalIds = [...new Set(operations.map((op) => op.externalId))]
    if (await deps.workspaces.anyBlocked(workspaceId, externalIds)) {
      throw badRequest('provided external_id is blacklisted and disallowed')
    }
    await submitOperations(deps, { workspaceId, requestId: res.locals.requestId! }, operations)
    res.status(201).json({ aliases_processed: operations.length, message: 'success' })
  },
}

const deleteUsers: ApiRoute<IdentityDeps> = {
  method: 'post',
  path: '/users/delete',
  summary: 'Delete users (profile, aliases, tokens, states, event history)',
  auth: 'api_key',
  permission: 'users.delete',
  write: true,
  body: DeleteBody,
  responses: { 201: '`{deleted, message: "success"}`' },
  handle: async (req, res, deps) => {
    const operations = parseDelete(req.body)
    await submitOperations(deps, { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }, operations)
    res.status(201).json({ deleted: operations.length, message: 'success' })
  },
}

/** POST /users/merge, /users/identify and /users/delete (interface.md 4.2 to 4.4). */
export const usersIdentityRoutes: RouteFamily<IdentityDeps> = { routes: [merge, identify, deleteUsers] }
