/**
 * Custom attribute value forms (interface.md 2.2 and the reference's nested custom attributes,
 * docs/track.md), applied in order to a profile's attributes: a plain value or array sets, `null`
 * removes, `{inc: n}` adds to a number, `{add, remove}` edits an array of values (both may appear;
 * `add` never duplicates a value the array already holds), `{$add, $update, $remove}` edits an
 * array of objects in place, finding items by `$identifier_key` and `$identifier_value`; with the
 * attributes object's `_merge_objects`, an object deep-merges into the object stored, and `$update`
 * merges `$new_object` into the items it finds instead of replacing them.
 */
export type CustomAttributes = Record<string, unknown>

/** The published size limit of a nested value (an object, or an array of objects): 100 KB of JSON. */
export const MAX_NESTED_BYTES = 100 * 1024

export function isIncrement(v: unknown): v is { inc: number } {
  return isPlainObject(v) && Object.keys(v).length === 1 && 'inc' in v
}

export function isArrayEdit(v: unknown): v is { add?: unknown[]; remove?: unknown[] } {
  if (!isPlainObject(v)) return false
  const keys = Object.keys(v)
  return keys.length > 0 && keys.every((k) => k === 'add' || k === 'remove')
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** An item of an array of objects, named by one of its members. */
interface ItemKey {
  $identifier_key: string
  $identifier_value: string | number | boolean
}

/** An edit of an array of objects; its operations apply in the order they are written. */
export interface ItemsEdit {
  $add?: Record<string, unknown>[]
  $update?: (ItemKey & { $new_object: Record<string, unknown> })[]
  $remove?: ItemKey[]
}

const ITEM_OPERATIONS = ['$add', '$update', '$remove']

/** Whether a value is an edit of an array of objects (validated: customAttributeProblem). */
export function isItemsEdit(v: unknown): v is ItemsEdit {
  return isPlainObject(v) && ('$add' in v || '$update' in v || '$remove' in v)
}

/** A value as its stored JSON's size in bytes. */
const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v))

const TOO_LARGE = `would be larger than ${MAX_NESTED_BYTES / 1024} KB (${MAX_NESTED_BYTES} bytes of JSON)`

/** Something an attribute's form could not do; the attribute is unchanged unless told. */
export interface AttributeProblem {
  type: 'nested_value_too_large' | 'nested_item_not_found'
  message: string
}

const sameValue = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** `patch` merged into `target` at every level (a new object; neither is changed). */
export function deepMerge(target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out = { ...target }
  for (const k in patch) {
    const [t, p] = [Object.hasOwn(out, k) ? out[k] : undefined, patch[k]]
    // Defined, not assigned: a member named __proto__ (JSON may have one) is data, not the prototype.
    Object.defineProperty(out, k, { value: isPlainObject(t) && isPlainObject(p) ? deepMerge(t, p) : p, enumerable: true, writable: true, configurable: true })
  }
  return out
}

const matches = (item: unknown, key: ItemKey) => isPlainObject(item) && Object.hasOwn(item, key.$identifier_key) && item[key.$identifier_key] === key.$identifier_value

/** An edit of the array of objects `name`: applied whole, or not at all when the result would be over the limit. */
function editItems(attrs: CustomAttributes, name: string, edit: ItemsEdit, merge: boolean): AttributeProblem | undefined {
  const current = attrs[name]
  // Nothing to find items in: only $add makes an array.
  if (!Array.isArray(current) && edit.$add === undefined) {
    return edit.$update?.length ? { type: 'nested_item_not_found', message: `${name}: is no array of objects; $update found nothing to update` } : undefined
  }
  let items: unknown[] = Array.isArray(current) ? current : []
  const notFound: string[] = []
  for (const operation in edit) {
    if (operation === '$add') items = [...items, ...edit.$add!]
    else if (operation === '$remove') for (const key of edit.$remove!) items = items.filter((item) => !matches(item, key))
    else if (operation === '$update') {
      for (const u of edit.$update!) {
        let found = false
        items = items.map((item) => {
          if (!matches(item, u)) return item
          found = true
          return merge ? deepMerge(item as Record<string, unknown>, u.$new_object) : u.$new_object
        })
        if (!found) notFound.push(`${u.$identifier_key} ${JSON.stringify(u.$identifier_value)}`)
      }
    }
  }
  if (edit.$remove === undefined || edit.$add !== undefined || edit.$update !== undefined) {
    if (jsonBytes(items) > MAX_NESTED_BYTES) return { type: 'nested_value_too_large', message: `${name}: ${TOO_LARGE}; not applied, the attribute is unchanged` }
  }
  attrs[name] = items
  if (notFound.length) return { type: 'nested_item_not_found', message: `${name}: $update found no item with ${notFound.join(', ')}` }
  return undefined
}

/** Applies one attribute's form; answers what it could not do (the rest of the object applies). */
export function applyCustomAttribute(attrs: CustomAttributes, name: string, value: unknown, mergeObjects = false): AttributeProblem | undefined {
  if (value === null) {
    delete attrs[name]
  } else if (isIncrement(value)) {
    const current = typeof attrs[name] === 'number' ? (attrs[name] as number) : 0
    attrs[name] = current + value.inc
  } else if (isArrayEdit(value)) {
    const current = Array.isArray(attrs[name]) ? [...(attrs[name] as unknown[])] : []
    for (const v of value.add ?? []) if (!current.some((c) => sameValue(c, v))) current.push(v)
    const kept = current.filter((c) => !(value.remove ?? []).some((r) => sameValue(c, r)))
    attrs[name] = kept
  } else if (isItemsEdit(value)) {
    return editItems(attrs, name, value, mergeObjects)
  } else if (mergeObjects && isPlainObject(value) && isPlainObject(attrs[name])) {
    const merged = deepMerge(attrs[name] as Record<string, unknown>, value)
    if (jsonBytes(merged) > MAX_NESTED_BYTES) return { type: 'nested_value_too_large', message: `${name}: merged, ${TOO_LARGE}; not applied, the attribute is unchanged` }
    attrs[name] = merged
  } else {
    attrs[name] = value
  }
  return undefined
}

const isItemValue = (v: unknown) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'

/** Why an item key ({$identifier_key, $identifier_value}, plus `extra`) is refused. */
function itemKeyProblem(item: unknown, at: string, extra?: '$new_object'): string | undefined {
  const shape = extra ? '{$identifier_key, $identifier_value, $new_object}' : '{$identifier_key, $identifier_value}'
  if (!isPlainObject(item)) return `${at} must be an object ${shape}`
  for (const k in item) if (k !== '$identifier_key' && k !== '$identifier_value' && k !== extra) return `${at} must be an object ${shape}, not with ${k}`
  const key = item.$identifier_key
  if (typeof key !== 'string' || key.length === 0 || key.length > 255) return `${at}.$identifier_key must be a member name of 1 to 255 characters`
  if (!isItemValue(item.$identifier_value)) return `${at}.$identifier_value must be a string, a number or a boolean`
  if (extra && !isPlainObject(item.$new_object)) return `${at}.$new_object must be an object`
  return undefined
}

/** Why an edit of an array of objects is refused. */
function itemsEditProblem(edit: Record<string, unknown>): string | undefined {
  for (const k in edit) if (!ITEM_OPERATIONS.includes(k)) return `unknown member ${k}: an edit of an array of objects has $add, $update and $remove`
  for (const operation of ITEM_OPERATIONS) {
    const list = edit[operation]
    if (list === undefined) continue
    if (!Array.isArray(list)) return `${operation} must be an array`
    for (let i = 0; i < list.length; i++) {
      const at = `${operation}[${i}]`
      const problem =
        operation === '$add' ? (isPlainObject(list[i]) ? undefined : `${at} must be an object (add values with add)`) : itemKeyProblem(list[i], at, operation === '$update' ? '$new_object' : undefined)
      if (problem) return problem
    }
  }
  return undefined
}

/** Why a custom attribute value is refused, or undefined when it is one of the accepted forms. */
export function customAttributeProblem(value: unknown): string | undefined {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) {
    return typeof value === 'number' && !Number.isFinite(value) ? 'must be a finite number' : undefined
  }
  if (Array.isArray(value)) return undefined
  if (isIncrement(value)) return Number.isInteger(value.inc) ? undefined : 'inc must be an integer'
  if (isArrayEdit(value)) {
    if (value.add !== undefined && !Array.isArray(value.add)) return 'add must be an array'
    if (value.remove !== undefined && !Array.isArray(value.remove)) return 'remove must be an array'
    return undefined
  }
  if (isPlainObject(value)) {
    if ('inc' in value) return 'an inc object must have only the inc member'
    for (const k in value) if (k.startsWith('$')) return itemsEditProblem(value)
    return undefined
  }
  return 'unsupported value'
}

/**
 * Why a nested value as sent is refused (over the published size limit), or undefined: an object,
 * an array holding an object, an edit adding or updating items. The value alone is refused; the
 * rest of its object applies. Values of other forms are not measured.
 */
export function nestedSizeProblem(value: object): string | undefined {
  if (Array.isArray(value)) {
    if (!value.some(isPlainObject)) return undefined
  } else if (
    // A checked value holding inc is the inc form; the cheap look first, as most objects sent are inc or add forms.
    'inc' in value ||
    (('add' in value || 'remove' in value) && isArrayEdit(value)) ||
    (isItemsEdit(value) && value.$add === undefined && value.$update === undefined)
  ) {
    return undefined
  }
  return jsonBytes(value) > MAX_NESTED_BYTES ? `is larger than ${MAX_NESTED_BYTES / 1024} KB (${MAX_NESTED_BYTES} bytes of JSON), the limit of a nested value; not stored` : undefined
}
