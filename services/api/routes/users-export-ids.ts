import { z } from 'zod'
import { findProfilesForRead } from '../../../shared/db/repositories/profile-lookup-repository.js'
import { loadStoredRecords } from '../../../shared/db/repositories/user-record-repository.js'
import { aliasKey } from '../../../shared/db/repositories/profile-repository.js'
import { normalizeEmail } from '../../../shared/domain/email.js'
import { toE164 } from '../../../shared/domain/phone.js'
import { ExportableFields, needsSummaries, projectRecord, withSummaries } from '../../../shared/domain/user-record.js'
import { badRequest } from '../../../shared/errors.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

const MAX_IDENTIFIERS = 50

export const ExportIdsBody = z
  .object({
    external_ids: z.array(z.string().min(1)).optional(),
    user_aliases: z.array(z.object({ alias_name: z.string().min(1), alias_label: z.string().min(1) }).strict()).optional(),
    service_id: z.string().min(1).optional(),
    // The reference's names: its profile id (interface.md's service_id) and a push token's device id.
    braze_id: z.string().min(1).optional(),
    device_id: z.string().min(1).optional(),
    email_address: z.string().min(1).optional(),
    phone: z.string().min(1).optional(),
    // `braze_id` is the reference's name of `service_id`: asked by that name, shown by that name.
    fields_to_export: z.array(z.enum([...ExportableFields, 'braze_id'])).optional(),
  })
  .strict()

/**
 * POST /users/export/ids (operator.md section 4): profiles read back in the exported user record
 * format: the stored record from Postgres, the event and purchase summaries from the event history
 * as exports read them (asked of ClickHouse only when the fields shown include them).
 */
const exportIds: ApiRoute<Pick<ApiDeps, 'pg' | 'clickhouseReads'>> = {
  method: 'post',
  path: '/users/export/ids',
  summary: 'Read profiles back by identifier, in the exported user record format',
  auth: 'api_key',
  permission: 'users.export.ids',
  body: ExportIdsBody,
  responses: { 201: '`{message: "success", users, invalid_user_ids?}`', 503: 'summaries asked while ClickHouse is unavailable' },
  handle: async (req, res, deps) => {
    const body = parseOr400(ExportIdsBody, req.body ?? {})
    const external = [...new Set(body.external_ids ?? [])]
    const aliases = body.user_aliases ?? []
    const serviceIds = [...new Set([body.service_id, body.braze_id].filter((x): x is string => x !== undefined))]
    const fields = body.fields_to_export && [...new Set(body.fields_to_export.map((f) => (f === 'braze_id' ? 'service_id' : f)))]
    const count =
      external.length + aliases.length + serviceIds.length + (body.device_id ? 1 : 0) + (body.email_address ? 1 : 0) + (body.phone ? 1 : 0)
    if (count === 0) throw badRequest('name at least one user: external_ids, user_aliases, service_id (braze_id), device_id, email_address or phone')
    if (count > MAX_IDENTIFIERS) throw badRequest(`at most ${MAX_IDENTIFIERS} identifiers per request (got ${count})`)
    const email = body.email_address ? normalizeEmail(body.email_address) : undefined
    const phone = body.phone ? (toE164(body.phone) ?? body.phone) : undefined

    const workspaceId = res.locals.auth!.workspaceId
    const matches = await findProfilesForRead(deps.pg, workspaceId, {
      externalIds: external,
      aliases,
      serviceIds,
      emails: email ? [email] : [],
      phones: phone ? [phone] : [],
      deviceIds: body.device_id ? [body.device_id] : [],
    })
    const found = new Set(matches.map((m) => `${m.kind}:${m.key}`))
    const invalid = [
      ...external.filter((id) => !found.has(`external_id:${id}`)),
      ...aliases.filter((a) => !found.has(`user_alias:${aliasKey(a.alias_label, a.alias_name)}`)).map((a) => a),
      ...serviceIds.filter((id) => !found.has(`service_id:${id}`)),
      ...(body.device_id && !found.has(`device_id:${body.device_id}`) ? [body.device_id] : []),
      ...(email && !found.has(`email:${email}`) ? [body.email_address!] : []),
      ...(phone && !found.has(`phone:${phone}`) ? [body.phone!] : []),
    ]
    const ids = [...new Set(matches.map((m) => m.profile_id))]
    const stored = await loadStoredRecords(deps.pg, ids)
    const summaries = needsSummaries({ fields }) && stored.length ? await deps.clickhouseReads.eventSummaries(workspaceId, ids) : new Map()
    const records = new Map(stored.map((s) => [s.profile.id, withSummaries(s.record, summaries.get(s.profile.id) ?? [])]))
    const now = new Date()
    const asBrazeId = body.fields_to_export?.includes('braze_id') ?? false
    const asServiceId = body.fields_to_export?.includes('service_id') ?? true
    const users = ids.flatMap((id) => {
      const record = records.get(id)
      if (!record) return []
      const projected: Partial<typeof record> & { braze_id?: string } = projectRecord(record, { fields, now })
      if (asBrazeId) {
        projected.braze_id = record.service_id
        if (!asServiceId) delete projected.service_id
      }
      return [projected]
    })
    res.status(201).json({ message: 'success', users, ...(invalid.length && { invalid_user_ids: invalid }) })
  },
}

export const usersExportIdsRoutes: RouteFamily<Pick<ApiDeps, 'pg' | 'clickhouseReads'>> = { routes: [exportIds] }
