import { z } from 'zod'
import { UserAlias } from '../../../shared/domain/track-validation.js'
import { badRequest } from '../../../shared/errors.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import { trackRequestJobs } from '../../../shared/queue/track-job-builder.js'
import type { AliasNewOperation, AliasUpdateOperation } from '../../../shared/queue/identity-jobs.js'
import type { AttributeOp } from '../../../shared/domain/track-operations.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'
import { ExternalId, submitOperations, type IdentityDeps } from './users-identity.js'

/** Aliases per request, as the reference allows. */
export const MAX_ALIASES = 50

const AliasName = UserAlias.shape.alias_name

export const AliasNewBody = z
  .object({
    user_aliases: z
      .array(z.object({ external_id: ExternalId.optional(), alias_name: AliasName, alias_label: AliasName }).strict())
      .min(1, 'must hold at least one new user alias object')
      .max(MAX_ALIASES, `must hold at most ${MAX_ALIASES} new user alias objects per request`),
  })
  .strict()

export const AliasUpdateBody = z
  .object({
    alias_updates: z
      .array(z.object({ alias_label: AliasName, old_alias_name: AliasName, new_alias_name: AliasName }).strict())
      .min(1, 'must hold at least one update user alias object')
      .max(MAX_ALIASES, `must hold at most ${MAX_ALIASES} update user alias objects per request`),
  })
  .strict()

type AliasDeps = IdentityDeps

/**
 * An alias without an external id creates an alias-only user: the attributes object that
 * /users/track rule 6 creates one with (`_update_existing_only: false`), queued on the alias's
 * track partition so it is ordered with the track work naming the alias. An alias some user holds
 * already is left alone there too.
 */
function aliasOnlyUser(index: number, alias: { alias_name: string; alias_label: string }): AttributeOp {
  return { index, identifier: { kind: 'user_alias', ...alias }, updateExistingOnly: false, fields: {}, custom: {} }
}

const aliasNew: ApiRoute<AliasDeps> = {
  method: 'post',
  path: '/users/alias/new',
  summary: 'Add aliases to identified users, or create alias-only users',
  auth: 'api_key',
  permission: 'users.alias.new',
  write: true,
  body: AliasNewBody,
  responses: { 201: '`{aliases_processed, message: "success"}`' },
  handle: async (req, res, deps) => {
    const body = parseOr400(AliasNewBody, req.body ?? {})
    const workspaceId = res.locals.auth!.workspaceId
    const requestId = res.locals.requestId!
    const toUsers: AliasNewOperation[] = []
    const aliasOnly: AttributeOp[] = []
    body.user_aliases.forEach((a, index) => {
      const alias = { alias_name: a.alias_name, alias_label: a.alias_label }
      if (a.external_id === undefined) aliasOnly.push(aliasOnlyUser(index, alias))
      else toUsers.push({ type: 'alias_new', index, externalId: a.external_id, alias })
    })
    if (await deps.workspaces.anyBlocked(workspaceId, toUsers.map((op) => op.externalId))) {
      throw badRequest('provided external_id is blacklisted and disallowed')
    }
    const trackJobs = (layout: TrackLayout) =>
      aliasOnly.length ? trackRequestJobs({ workspaceId, requestId }, { attributes: aliasOnly, events: [], purchases: [] }, layout.partitions) : []
    await submitOperations(deps, { workspaceId, requestId }, toUsers, trackJobs)
    res.status(201).json({ aliases_processed: body.user_aliases.length, message: 'success' })
  },
}

const aliasUpdate: ApiRoute<AliasDeps> = {
  method: 'post',
  path: '/users/alias/update',
  summary: "Rename users' aliases under their labels",
  auth: 'api_key',
  permission: 'users.alias.update',
  write: true,
  body: AliasUpdateBody,
  responses: { 201: '`{aliases_processed, message: "success"}`' },
  handle: async (req, res, deps) => {
    const body = parseOr400(AliasUpdateBody, req.body ?? {})
    const operations = body.alias_updates.map((u, index): AliasUpdateOperation => {
      if (u.old_alias_name === u.new_alias_name) throw badRequest(`alias_updates.${index}.new_alias_name: must differ from old_alias_name`)
      return { type: 'alias_update', index, ...u }
    })
    await submitOperations(deps, { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }, operations)
    res.status(201).json({ aliases_processed: operations.length, message: 'success' })
  },
}

/** POST /users/alias/new and /users/alias/update (docs/identity.md): identity changes, on the identity queue. */
export const usersAliasRoutes: RouteFamily<AliasDeps> = { routes: [aliasNew, aliasUpdate] }
