import type { Response } from 'express'
import { z } from 'zod'
import { findSubscriptionGroups, type SubscriptionGroup } from '../../../shared/db/repositories/subscription-group-repository.js'
import {
  readGroupStatesByAddress,
  readGroupStatesByExternalId,
  readUserGroupStates,
  type GroupState,
} from '../../../shared/db/repositories/subscription-state-repository.js'
import { isPlainObject } from '../../../shared/domain/attributes.js'
import { EmailAddress } from '../../../shared/domain/email.js'
import { PhoneNumber } from '../../../shared/domain/phone.js'
import { badRequest } from '../../../shared/errors.js'
import { submitRequest } from '../../../shared/queue/jobs.js'
import { trackChangeJobs } from '../../../shared/queue/track-job-builder.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import type { SubscriptionChange } from '../../../shared/queue/track-jobs.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400, upTo50 } from '../validation.js'

/** interface.md section 7, word for word. */
const EMAIL_AND_PHONE_MESSAGE = 'Either an email address or a phone number should be provided, but not both.'

const MAX_V2_GROUPS = 25

/** Postgres for the groups and states, the queues and the partition count for the changes. */
type SubscriptionDeps = Pick<ApiDeps, 'pg' | 'producer'>

const ExternalId = z.string().min(1, 'must be a non-empty string').max(512)
const SubscriptionState = z.enum(['subscribed', 'unsubscribed'])
const GroupId = z.string().min(1, 'is required').max(255, 'must be at most 255 characters')

/** One group's share of a set request, in the form both versions of the endpoint reduce to. */
interface GroupUpdate {
  groupId: string
  state: GroupState
  externalIds: string[]
  emails: string[]
  phones: string[]
  /** The request's own field names, so that messages point at what was sent. */
  fields: { group: string; externalIds: string; emails: string; phones: string }
}

const SetStatusV1 = z
  .object({
    subscription_group_id: GroupId,
    subscription_state: SubscriptionState,
    external_id: upTo50(ExternalId, 'external ids', 0).optional(),
    email: upTo50(EmailAddress, 'email addresses').optional(),
    phone: upTo50(PhoneNumber, 'phone numbers').optional(),
  })
  .strict()

const GroupUpdateV2 = z
  .object({
    subscription_group_id: GroupId,
    subscription_state: SubscriptionState,
    external_ids: upTo50(ExternalId, 'external ids', 0).optional(),
    emails: upTo50(EmailAddress, 'email addresses').optional(),
    phones: upTo50(PhoneNumber, 'phone numbers').optional(),
  })
  .strict()

const SetStatusV2 = z
  .object({
    subscription_groups: z
      .array(GroupUpdateV2)
      .min(1, 'must hold at least 1 subscription group')
      .max(MAX_V2_GROUPS, `must hold at most ${MAX_V2_GROUPS} subscription groups per request`),
  })
  .strict()

const present = (v: unknown) => v !== undefined && v !== null

/** Checked before anything else, so the exact message wins over any other problem with the values. */
function refuseEmailAndPhone(obj: unknown, emailField: string, phoneField: string): void {
  if (isPlainObject(obj) && present(obj[emailField]) && present(obj[phoneField])) throw badRequest(EMAIL_AND_PHONE_MESSAGE)
}

/** Loads the groups named; an unknown one is a 400 naming the field that carried it. */
async function groupsOr400(deps: SubscriptionDeps, workspaceId: string, named: { field: string; groupId: string }[]) {
  const groups = await findSubscriptionGroups(deps.pg, workspaceId, [...new Set(named.map((n) => n.groupId))])
  for (const n of named) {
    if (!groups.has(n.groupId)) throw badRequest(`${n.field}: unknown subscription group ${n.groupId}`)
  }
  return groups
}

/** Email groups take emails, SMS and WhatsApp groups take phones; every update names somebody. */
function checkKeysFitChannel(u: GroupUpdate, group: SubscriptionGroup) {
  const f = u.fields
  if (group.channel === 'email' && u.phones.length) {
    throw badRequest(`${f.phones}: subscription group ${group.id} is an email group; send ${f.externalIds} or ${f.emails}`)
  }
  if (group.channel !== 'email' && u.emails.length) {
    throw badRequest(`${f.emails}: subscription group ${group.id} is an ${group.channel} group; send ${f.externalIds} or ${f.phones}`)
  }
  if (u.externalIds.length + u.emails.length + u.phones.length === 0) {
    const alternative = group.channel === 'email' ? f.emails : f.phones
    throw badRequest(`${f.externalIds}: ${f.externalIds} or ${alternative} is required for an ${group.channel} subscription group`)
  }
}

function changesOf(u: GroupUpdate): SubscriptionChange[] {
  const change = (key: SubscriptionChange['key']): SubscriptionChange => ({
    key,
    subscription_group_id: u.groupId,
    subscription_state: u.state,
  })
  return [
    ...u.externalIds.map((value) => change({ kind: 'external_id', value })),
    ...u.emails.map((value) => change({ kind: 'email', value })),
    ...u.phones.map((value) => change({ kind: 'phone', value })),
  ]
}

/** Checks every update against its group, queues the changes in request order, answers 201. */
async function acceptGroupUpdates(deps: SubscriptionDeps, res: Response, updates: GroupUpdate[]) {
  const named = updates.map((u) => ({ field: u.fields.group, groupId: u.groupId }))
  const request = { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }
  const groups = await groupsOr400(deps, request.workspaceId, named)
  for (const u of updates) checkKeysFitChannel(u, groups.get(u.groupId)!)
  const jobs = (layout: TrackLayout) => trackChangeJobs(request, { subscriptionChanges: updates.flatMap(changesOf) }, layout.partitions)
  await submitRequest(deps.producer, { ...request, jobs })
  res.status(201).json({ message: 'success' })
}

/** email and phone are checked only when used: with external_id they are ignored. */
const StatusQuery = z.object({
  subscription_group_id: GroupId,
  external_id: upTo50(ExternalId, 'external ids').optional(),
  // Checked only when used (external_id wins), so their shape is checked by readKeysOf.
  email: z.unknown().optional().describe('one address or an array of up to 50 (ignored when external_id is sent)'),
  phone: z.unknown().optional().describe('one E.164 number or an array of up to 50 (ignored when external_id is sent)'),
})

const StateLabel: Record<GroupState, 'Subscribed' | 'Unsubscribed'> = { subscribed: 'Subscribed', unsubscribed: 'Unsubscribed' }

function labelOf(state: GroupState | undefined): 'Subscribed' | 'Unsubscribed' | 'Unknown' {
  return state ? StateLabel[state] : 'Unknown'
}

/** The keys a status read names, each as sent (the answer's key) and as stored. */
type ReadKeys = { kind: SubscriptionChange['key']['kind']; sent: string[]; stored: string[] }

function addressKeys(kind: 'email' | 'phone', raw: unknown): ReadKeys {
  const noun = kind === 'email' ? 'email addresses' : 'phone numbers'
  const sent = parseOr400(z.object({ [kind]: upTo50(z.string(), noun) }), { [kind]: raw })[kind] as string[]
  const item = kind === 'email' ? EmailAddress : PhoneNumber
  const stored = parseOr400(z.object({ [kind]: z.array(item) }), { [kind]: sent })[kind] as string[]
  return { kind, sent, stored }
}

/** external_id wins over email and phone; email and phone together are refused. */
function readKeysOf(q: z.infer<typeof StatusQuery>): ReadKeys {
  if (q.external_id) return { kind: 'external_id', sent: q.external_id, stored: q.external_id }
  if (present(q.email) && present(q.phone)) throw badRequest(EMAIL_AND_PHONE_MESSAGE)
  if (present(q.email)) return addressKeys('email', q.email)
  if (present(q.phone)) return addressKeys('phone', q.phone)
  throw badRequest('external_id: one of external_id, email or phone is required')
}

function checkReadFitsChannel(keys: ReadKeys, group: SubscriptionGroup) {
  if (keys.kind === 'phone' && group.channel === 'email') {
    throw badRequest(`phone: subscription group ${group.id} is an email group; send external_id or email`)
  }
  if (keys.kind === 'email' && group.channel !== 'email') {
    throw badRequest(`email: subscription group ${group.id} is an ${group.channel} group; send external_id or phone`)
  }
}

const setStatusV1: ApiRoute<SubscriptionDeps> = {
  method: 'post',
  path: '/subscription/status/set',
  summary: 'Set the subscription state of users in one subscription group',
  auth: 'api_key',
  permission: 'subscription.status.set',
  write: true,
  body: SetStatusV1,
  responses: { 201: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    refuseEmailAndPhone(req.body, 'email', 'phone')
    const body = parseOr400(SetStatusV1, req.body)
    await acceptGroupUpdates(deps, res, [
      {
        groupId: body.subscription_group_id,
        state: body.subscription_state,
        externalIds: body.external_id ?? [],
        emails: body.email ?? [],
        phones: body.phone ?? [],
        fields: { group: 'subscription_group_id', externalIds: 'external_id', emails: 'email', phones: 'phone' },
      },
    ])
  },
}

const setStatusV2: ApiRoute<SubscriptionDeps> = {
  method: 'post',
  path: '/v2/subscription/status/set',
  summary: 'Set subscription states in several subscription groups',
  auth: 'api_key',
  permission: 'subscription.status.set',
  write: true,
  body: SetStatusV2,
  responses: { 201: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    const raw = isPlainObject(req.body) ? req.body.subscription_groups : undefined
    if (Array.isArray(raw)) for (const g of raw) refuseEmailAndPhone(g, 'emails', 'phones')
    const body = parseOr400(SetStatusV2, req.body)
    const updates = body.subscription_groups.map((g, i): GroupUpdate => {
      const at = `subscription_groups.${i}`
      return {
        groupId: g.subscription_group_id,
        state: g.subscription_state,
        externalIds: g.external_ids ?? [],
        emails: g.emails ?? [],
        phones: g.phones ?? [],
        fields: { group: `${at}.subscription_group_id`, externalIds: `${at}.external_ids`, emails: `${at}.emails`, phones: `${at}.phones` },
      }
    })
    await acceptGroupUpdates(deps, res, updates)
  },
}

const getStatus: ApiRoute<SubscriptionDeps> = {
  method: 'get',
  path: '/subscription/status/get',
  summary: 'Read the state of users in a subscription group',
  auth: 'api_key',
  permission: 'subscription.status.get',
  query: StatusQuery,
  responses: { 200: '`{status: {<key>: "Subscribed" | "Unsubscribed" | "Unknown"}, message: "success"}`' },
  handle: async (req, res, deps) => {
    const q = parseOr400(StatusQuery, req.query)
    const keys = readKeysOf(q)
    const workspaceId = res.locals.auth!.workspaceId
    const groups = await groupsOr400(deps, workspaceId, [{ field: 'subscription_group_id', groupId: q.subscription_group_id }])
    const group = groups.get(q.subscription_group_id)!
    checkReadFitsChannel(keys, group)
    const stored = [...new Set(keys.stored)]
    const states =
      keys.kind === 'external_id'
        ? await readGroupStatesByExternalId(deps.pg, workspaceId, group.id, stored)
        : await readGroupStatesByAddress(deps.pg, workspaceId, { groupId: group.id, kind: keys.kind, addresses: stored })
    const status = Object.fromEntries(keys.sent.map((sent, i) => [sent, labelOf(states.get(keys.stored[i]))]))
    res.json({ status, message: 'success' })
  },
}

/** The users to list, by any of their keys, and one page of them: the reference's default (and largest) page is 100. */
const UserStatusQuery = z
  .object({
    external_id: upTo50(ExternalId, 'external ids').optional(),
    email: upTo50(EmailAddress, 'email addresses').optional(),
    phone: upTo50(PhoneNumber, 'phone numbers').optional(),
    limit: z.coerce.number().int('must be an integer').min(1, 'must be at least 1').max(100, 'must be at most 100').default(100),
    offset: z.coerce.number().int('must be an integer').min(0, 'must be 0 or more').default(0),
  })
  .refine((q) => q.external_id || q.email || q.phone, { message: 'send external_id, email or phone (1 to 50 of them)', path: ['external_id'] })

/**
 * GET /subscription/user/status: every user any key names (several users sharing an email are
 * each listed), in a stable order, with the groups each has a state in; read from Postgres at once.
 */
const userStatus: ApiRoute<SubscriptionDeps> = {
  method: 'get',
  path: '/subscription/user/status',
  summary: "List users' subscription groups and their states",
  auth: 'api_key',
  permission: 'subscription.groups.get',
  query: UserStatusQuery,
  responses: {
    200: '`{users: [{external_id, email, phone, subscription_groups: [{id, name, channel, status}]}], total_count, message: "success"}`',
  },
  handle: async (req, res, deps) => {
    const q = parseOr400(UserStatusQuery, req.query)
    const keys = { externalIds: q.external_id ?? [], emails: q.email ?? [], phones: q.phone ?? [] }
    const { total, users } = await readUserGroupStates(deps.pg, res.locals.auth!.workspaceId, keys, { limit: q.limit, offset: q.offset })
    res.json({
      users: users.map((u) => ({
        email: u.email,
        phone: u.phone,
        external_id: u.external_id,
        subscription_groups: u.groups.map((g) => ({ id: g.id, name: g.name, channel: g.channel, status: StateLabel[g.state] })),
      })),
      total_count: total,
      message: 'success',
    })
  },
}

/** interface.md 4.7 to 4.9, and the reference's list of a user's groups (docs/subscriptions.md). */
export const subscriptionRoutes: RouteFamily<SubscriptionDeps> = { routes: [setStatusV1, setStatusV2, getStatus, userStatus] }
