/**
 * Custom attribute value forms of interface.md 2.2, applied in order to a profile's attributes:
 * a plain value or array sets, `null` removes, `{inc: n}` adds to a number, `{add, remove}`
 * edits an array (both may appear; `add` never duplicates a value the array already holds).
 */
export type CustomAttributes = Record<string, unknown>

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

const sameValue = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

export function applyCustomAttribute(attrs: CustomAttributes, name: string, value: unknown): void {
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
  } else {
    attrs[name] = value
  }
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
    return undefined
  }
  return 'unsupported value'
}
