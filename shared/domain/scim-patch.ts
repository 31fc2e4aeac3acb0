import { ScimError, scimPatch, type ScimPatchOperation } from 'scim-patch'
import { parse } from 'scim2-parse-filter'
import { filterBoundsProblem, parserMessage, PatchOpSchema, UserSchema, scimError, type ScimType, type ScimUser } from './scim.js'

/**
 * RFC 7644 section 3.5.2 PATCH of a User, as Okta and Entra ID send it. The operations are checked
 * and normalised here (op names and attribute names in any case), applied by `scim-patch` to a copy
 * of the user's SCIM representation, and the result is handed back to be validated and stored like
 * the body of a PUT (whose schema reads Entra ID's "True"/"False"): the request applies whole or not at all.
 */

const refuse = (scimType: ScimType, detail: string) => scimError(400, detail, scimType)

/** Attributes stored or checked, by lower-case name, with their sub-attributes. */
const Writable: Record<string, { name: string; subs?: string[]; multiValued?: boolean }> = {
  schemas: { name: 'schemas' },
  username: { name: 'userName' },
  externalid: { name: 'externalId' },
  displayname: { name: 'displayName' },
  active: { name: 'active' },
  department: { name: 'department' },
  // middleName and the honorifics are accepted and not stored, as in a POST or PUT body.
  name: { name: 'name', subs: ['formatted', 'givenName', 'familyName', 'middleName', 'honorificPrefix', 'honorificSuffix'] },
  emails: { name: 'emails', subs: ['value', 'type', 'primary', 'display'], multiValued: true },
  permissions: { name: 'permissions', subs: ['companyPermissions', 'appGroup'] },
}
const ReadOnly = new Set(['id', 'meta', 'lastsigninat', 'groups'])
/** Core User attributes (RFC 7643 section 4.1) this service does not keep: operations on them are accepted and change nothing. */
const NotStored = new Set([
  'nickname', 'profileurl', 'title', 'usertype', 'preferredlanguage', 'locale', 'timezone', 'password', 'phonenumbers', 'ims',
  'photos', 'addresses', 'entitlements', 'roles', 'x509certificates',
])

const PathPattern = /^(?:(urn:[^[\]]+):)?([A-Za-z][\w$-]*)(?:\[(.+)\])?(?:\.([A-Za-z][\w$-]*))?$/

/** The path in canonical spelling, `undefined` for one naming something not stored (the operation is dropped). */
function canonicalPath(path: string): string | undefined {
  // Bounded before the pattern and the value filter's parser (and scim-patch's own) see it.
  const tooLarge = filterBoundsProblem(path, 'path')
  if (tooLarge) throw refuse('invalidPath', tooLarge)
  const trimmed = path.trim()
  const m = PathPattern.exec(trimmed)
  if (!m) throw refuse('invalidPath', `path ${JSON.stringify(path)} is malformed`)
  const [, urn, attr, valueFilter, sub] = m
  // Schema extensions (enterprise, an identity provider's own), whole or by attribute, are accepted
  // and not stored, as in a POST or PUT body.
  if (urn && urn.toLowerCase() !== UserSchema.toLowerCase()) return undefined
  const key = attr.toLowerCase()
  if (ReadOnly.has(key)) throw refuse('mutability', `${attr} is read-only`)
  if (NotStored.has(key)) return undefined
  const known = Writable[key]
  if (!known) throw refuse('invalidPath', `path ${JSON.stringify(path)}: users have no attribute ${attr}`)
  if (valueFilter !== undefined) {
    if (!known.multiValued) throw refuse('invalidPath', `path ${JSON.stringify(path)}: ${known.name} is not multi-valued, so it takes no [filter]`)
    try {
      parse(valueFilter)
    } catch (e) {
      throw refuse('invalidPath', `path ${JSON.stringify(path)}: malformed value filter${parserMessage(e)}`)
    }
  }
  let subName = ''
  if (sub !== undefined) {
    const canonical = known.subs?.find((s) => s.toLowerCase() === sub.toLowerCase())
    if (!canonical) throw refuse('invalidPath', `path ${JSON.stringify(path)}: ${known.name} has no sub-attribute ${sub}`)
    subName = `.${canonical}`
  }
  return `${known.name}${valueFilter !== undefined ? `[${valueFilter}]` : ''}${subName}`
}

/** A path-less value: its keys canonicalised, attributes not stored dropped (dotted and URN-prefixed keys too). */
function canonicalValue(value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw refuse('invalidValue', 'an operation without a path needs an object value holding the attributes to set')
  }
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(value)) {
    let path: string | undefined
    try {
      path = canonicalPath(key)
    } catch (e) {
      // Unknown keys are ignored, as in a POST or PUT body; read-only ones are still refused.
      if ((e as { extra?: { scimType?: string } }).extra?.scimType === 'mutability') throw e
      continue
    }
    if (path === undefined) continue
    // RFC 7644 section 3.5.2.3: sub-attributes not in the value are left unchanged, so a complex
    // value is set sub-attribute by sub-attribute (scim-patch would replace it whole).
    if ((path === 'name' || path === 'permissions') && v !== null && typeof v === 'object' && !Array.isArray(v)) {
      Object.assign(out, canonicalValue(Object.fromEntries(Object.entries(v).map(([sk, sv]) => [`${path}.${sk}`, sv]))))
    } else {
      out[path] = v
    }
  }
  return out
}

const ScimTypeOf: Record<string, ScimType> = { noTarget: 'noTarget', invalidSyntax: 'invalidSyntax', invalidPath: 'invalidPath' }

/**
 * The operations of a PatchOp body, checked: `schemas` (when sent) names the PatchOp message,
 * `Operations` is a non-empty list of add/remove/replace in any letter case, with a `value` for
 * add and replace and a `path` for remove.
 */
export function patchOperations(body: unknown): ScimPatchOperation[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw refuse('invalidSyntax', 'the body must be a PatchOp object')
  const { schemas, Operations } = body as { schemas?: unknown; Operations?: unknown }
  // RFC 7644 requires schemas; some clients leave it out, which is accepted, but a wrong one is not.
  if (schemas !== undefined && !(Array.isArray(schemas) && schemas.includes(PatchOpSchema))) {
    throw refuse('invalidSyntax', `schemas must contain ${PatchOpSchema}`)
  }
  if (!Array.isArray(Operations) || Operations.length === 0) throw refuse('invalidSyntax', 'Operations must be a non-empty array of operations')
  const ops: ScimPatchOperation[] = []
  Operations.forEach((raw: unknown, i) => {
    const at = `Operations.${i}`
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw refuse('invalidSyntax', `${at} must be an object`)
    const { op, path, value } = raw as { op?: unknown; path?: unknown; value?: unknown }
    const name = typeof op === 'string' ? op.toLowerCase() : undefined
    if (name !== 'add' && name !== 'remove' && name !== 'replace') throw refuse('invalidSyntax', `${at}.op must be add, remove or replace, not ${JSON.stringify(op)}`)
    if (path !== undefined && typeof path !== 'string') throw refuse('invalidPath', `${at}.path must be a string`)
    if (name === 'remove') {
      if (!path) throw refuse('noTarget', `${at}: a remove operation needs a path`)
      const target = canonicalPath(path)
      if (target !== undefined) ops.push({ op: 'remove', path: target })
      return
    }
    if (value === undefined) throw refuse('invalidSyntax', `${at}: an ${name} operation needs a value`)
    if (path) {
      const target = canonicalPath(path)
      if (target !== undefined) ops.push({ op: name, path: target, value })
    } else {
      ops.push({ op: name, value: canonicalValue(value) })
    }
  })
  return ops
}

/**
 * The user after the operations, as a request body for the PUT validation; the read-only
 * attributes (`id`, `meta`, `lastSignInAt`) and the userName (any letter case) must be unchanged.
 */
export function applyPatch(user: ScimUser, ops: ScimPatchOperation[]): Record<string, unknown> {
  // emails is always a list here, so a value filter on it finds no element rather than no list.
  const document = { ...structuredClone(user), emails: user.emails ?? [] }
  // A remove of a list that is not there removes nothing (scim-patch refuses a filter on a missing list).
  const applicable = ops.filter((o) => !(o.op === 'remove' && /^\w+\[/.test(o.path) && !Array.isArray((document as Record<string, unknown>)[o.path.split('[')[0]])))
  // One operation at a time, so that a refusal names the operation it comes from.
  for (const op of applicable) {
    try {
      scimPatch(document as never, [op], { mutateDocument: true, treatMissingAsAdd: true })
    } catch (e) {
      // scim-patch works on this copy only, so whatever it throws comes from the request (a null
      // value for a complex attribute is a TypeError in it): a refusal, never a 500.
      // A value filter matching nothing (FilterArrayTargetNotFound) is the RFC's noTarget.
      const scimType = !(e instanceof ScimError) ? 'invalidValue' : e.constructor.name === 'FilterArrayTargetNotFound' ? 'noTarget' : (ScimTypeOf[e.scimCode ?? ''] ?? 'invalidValue')
      throw refuse(scimType, `operation ${op.op}${'path' in op && op.path ? ` ${op.path}` : ''}: ${(e as Error).message}`)
    }
  }
  const patched = document as Record<string, unknown>
  if (typeof patched.userName !== 'string' || patched.userName.toLowerCase() !== user.userName.toLowerCase()) {
    throw refuse('mutability', `userName cannot be changed (it is ${user.userName})`)
  }
  for (const key of ['id', 'meta', 'lastSignInAt'] as const) {
    if (JSON.stringify(patched[key]) !== JSON.stringify(user[key])) throw refuse('mutability', `${key} is read-only`)
  }
  if (Array.isArray(patched.emails) && patched.emails.length === 0) delete patched.emails
  // A removed attribute becomes unassigned (RFC 7644 3.5.2.2): for `active`, its default, an active
  // account; the PUT validation would otherwise keep the stored value, and the remove would change nothing.
  if (patched.active === undefined) patched.active = true
  return patched
}
