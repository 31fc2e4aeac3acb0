/** What a command produced: the server's JSON for scripts, and lines for a person. */
export interface Outcome {
  data: unknown
  lines: string[]
}

export function print(outcome: Outcome, json: boolean | undefined): void {
  if (json) console.log(JSON.stringify(outcome.data ?? null, null, 2))
  else console.log(outcome.lines.join('\n'))
}

/** A title followed by aligned `label  value` lines; absent values are left out. */
export function describe(title: string, fields: Record<string, unknown>): string[] {
  const present = Object.entries(fields).filter(([, v]) => v !== undefined && v !== null)
  const width = Math.max(0, ...present.map(([k]) => k.length))
  return [title, ...present.map(([k, v]) => `  ${k.padEnd(width)}  ${formatValue(v)}`)]
}

function formatValue(v: unknown): string {
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object')) return v.length ? v.join(', ') : '(none)'
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}
