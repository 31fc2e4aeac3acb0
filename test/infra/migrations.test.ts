import { readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

const root = path.resolve(import.meta.dirname, '../../infra/migrations')

/** Migration files of a folder, by the number they start with. */
function byNumber(folder: string): Map<string, string[]> {
  const files = readdirSync(path.join(root, folder)).filter((f) => f.endsWith('.sql'))
  const numbers = new Map<string, string[]>()
  for (const f of files) {
    const n = /^(\d{3})_[a-z0-9_]+\.sql$/.exec(f)?.[1] ?? `malformed: ${f}`
    numbers.set(n, [...(numbers.get(n) ?? []), f])
  }
  return numbers
}

describe.each(['postgres', 'clickhouse'])('%s migrations', (folder) => {
  it('are named NNN_words.sql, each number once, so their order is never a tie', () => {
    const numbers = byNumber(folder)
    expect([...numbers.keys()].filter((n) => n.startsWith('malformed'))).toEqual([])
    expect([...numbers.entries()].filter(([, files]) => files.length > 1)).toEqual([])
    expect(numbers.size).toBeGreaterThan(3)
  })
})
