/**
 * Query parameters written into the SQL as literals. The embedded engine runs every query that
 * carries parameters one at a time, process-wide (chdb-node serializes them: its parameter state
 * is not isolated between concurrent queries), so a parameterized read waits behind every
 * parameterized read of the track worker; a query without parameters runs beside them. A
 * statement's text travels in a server's request body, not its URL, within its max_query_size
 * (256 KiB by default): for values of a bounded size only. Only the types the segment compiler
 * and the history sweep bind are rendered; any other is refused.
 */
export function inlineQueryParams(sql: string, params: Record<string, unknown>): string {
  return sql.replace(/\{(\w+):([\w()]+)\}/g, (_, name: string, type: string) => {
    if (!(name in params)) throw new Error(`no value for query parameter ${name}`)
    return literal(params[name], type)
  })
}

function literal(value: unknown, type: string): string {
  const array = /^Array\((\w+)\)$/.exec(type)
  if (array) {
    if (!Array.isArray(value)) throw new Error(`parameter of type ${type} needs an array`)
    // Unsigned integers as bare numbers: one literal array for the parser, not a call per element.
    const element = UNSIGNED.test(array[1]) ? unsignedText : (v: unknown) => literal(v, array[1])
    return `CAST([${value.map((v) => element(v, array[1])).join(', ')}], '${type}')`
  }
  if (type === 'String') {
    if (typeof value !== 'string') throw new Error('parameter of type String needs a string')
    return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
  }
  if (UNSIGNED.test(type)) return `to${type}(${unsignedText(value, type)})`
  if (type === 'Float64') {
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error('parameter of type Float64 needs a finite number')
    return `toFloat64(${JSON.stringify(value)})`
  }
  throw new Error(`query parameter type ${type} cannot be written as a literal`)
}

const UNSIGNED = /^UInt(8|16|32|64)$/

function unsignedText(value: unknown, type: string): string {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? value : typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? String(value) : undefined
  if (n === undefined) throw new Error(`parameter of type ${type} needs a non-negative integer`)
  return n
}
