// Reads back what a mixed load (bench/mixed-load.ts) left and compares it with what the generator
// says it must be: for a sample of its users every attribute, the `inc`ed number and the `add`ed
// array against their values before the load, and their events and purchases in ClickHouse; for
// the whole load, the sum of the `inc`s and the count of its events and purchases.
import pg from 'pg'
import type { Preloaded } from './preload.js'
import { openEngine } from './preload.js'
import { ALIAS_LABEL, attributesOf, identifierOf, kindOf, type Expected } from './mixed-load.js'

interface ProfileState {
  id: number
  /** Profiles the user's identifier finds: exactly one when nothing was duplicated. */
  matches: number
  row: Record<string, unknown>
}
export type State = Map<number, ProfileState>

/** The identifier value by which user u's profile is looked up. */
function keyOf(u: number, tag: string): { column: 'external_id' | 'email' | 'phone' | 'alias'; value: string } {
  const id = identifierOf(u, tag)
  if (kindOf(u) === 'user_alias') return { column: 'alias', value: (id.user_alias as { alias_name: string }).alias_name }
  const [column, value] = Object.entries(id)[0] as ['external_id' | 'email' | 'phone', string]
  return { column, value }
}

/** The profiles of the given users, as stored now. */
export async function readProfiles(db: pg.Client, workspaceId: string, users: number[], tag: string): Promise<State> {
  const byColumn = new Map<string, Map<string, number>>()
  for (const u of users) {
    const k = keyOf(u, tag)
    if (!byColumn.has(k.column)) byColumn.set(k.column, new Map())
    byColumn.get(k.column)!.set(k.value, u)
  }
  const state: State = new Map()
  for (const [column, values] of byColumn) {
    const sql =
      column === 'alias'
        ? `SELECT a.alias_name AS key, p.* FROM profile_aliases a JOIN profiles p ON p.id = a.profile_id
           WHERE a.workspace_id = $1 AND a.alias_label = '${ALIAS_LABEL}' AND a.alias_name = ANY($2)`
        : `SELECT ${column} AS key, * FROM profiles WHERE workspace_id = $1 AND ${column} = ANY($2)`
    const { rows } = await db.query(sql, [workspaceId, [...values.keys()]])
    for (const row of rows) {
      const u = values.get(row.key)!
      const prior = state.get(u)
      state.set(u, { id: Number(row.id), matches: (prior?.matches ?? 0) + 1, row })
    }
  }
  return state
}

/** The sum of every profile's `logins` in the workspace: grows by one for each attribute object of the load. */
export async function loginsSum(db: pg.Client, workspaceId: string): Promise<number> {
  const { rows } = await db.query(`SELECT coalesce(sum((custom_attributes->>'logins')::numeric), 0) AS s FROM profiles WHERE workspace_id = $1`, [workspaceId])
  return Number(rows[0].s)
}

/** A sample of the users the load names: the profiles compared after it. */
export const sampleOf = (e: Map<number, Expected>) => [...e.keys()].filter((u) => u % 50 === 0)

export interface CheckResult {
  sampledUsers: number
  mismatches: number
  /** The first few, for the reader. */
  examples: string[]
  loginsAdded: number
  loginsExpected: number
  eventsStored: number
  eventsExpected: number
  purchasesStored: number
  purchasesExpected: number
  exact: boolean
}

/**
 * Compares the sampled users' profiles (`before`, `after`) and their events and purchases of this
 * run (ClickHouse, read once the service has stopped: chDB opens a data directory in one process).
 */
export async function check(opts: {
  preloaded: Preloaded
  tag: string
  expected: Map<number, Expected>
  before: State
  after: State
  loginsAdded: number
}): Promise<CheckResult> {
  const { preloaded, tag, expected, before, after } = opts
  const mismatches: string[] = []
  const bad = (u: number, what: string) => mismatches.push(`user ${u} (${kindOf(u)}): ${what}`)
  for (const u of before.keys()) if (!after.has(u)) bad(u, 'profile gone')
  const sample = sampleOf(expected)
  for (const u of sample) {
    const e = expected.get(u)!
    const a = after.get(u)
    if (!a) {
      bad(u, 'no profile')
      continue
    }
    if (a.matches !== 1) bad(u, `${a.matches} profiles`)
    const b = before.get(u)
    const custom = a.row.custom_attributes as Record<string, unknown>
    const priorCustom = (b?.row.custom_attributes ?? {}) as Record<string, unknown>
    const logins = Number(custom.logins ?? 0)
    const wantLogins = Number(priorCustom.logins ?? 0) + e.attributeObjects
    if (logins !== wantLogins) bad(u, `logins ${logins}, expected ${wantLogins}`)
    if (e.attributeObjects === 0) continue
    const { first_name, last_name, home_city, country, language, email, ...wantCustom } = attributesOf(u, tag)
    const want: Record<string, unknown> = { first_name, last_name, home_city, country, language, email }
    for (const [k, v] of Object.entries(want)) if (a.row[k] !== v) bad(u, `${k} ${String(a.row[k])}, expected ${String(v)}`)
    for (const [k, v] of Object.entries(wantCustom)) if (custom[k] !== v) bad(u, `${k} ${JSON.stringify(custom[k])}, expected ${JSON.stringify(v)}`)
    const tags = new Set((custom.tags ?? []) as string[])
    const wantTags = new Set([...((priorCustom.tags ?? []) as string[]), ...e.tags])
    if (tags.size !== wantTags.size || [...wantTags].some((t) => !tags.has(t))) bad(u, `tags ${[...tags]}, expected ${[...wantTags]}`)
  }

  let eventsExpected = 0
  let purchasesExpected = 0
  for (const e of expected.values()) {
    eventsExpected += e.events
    purchasesExpected += e.purchases
  }
  const loginsExpected = [...expected.values()].reduce((s, e) => s + e.attributeObjects, 0)
  if (opts.loginsAdded !== loginsExpected) mismatches.unshift(`logins added over the workspace ${opts.loginsAdded}, expected ${loginsExpected}`)

  const ch = openEngine(preloaded)
  let stored: Record<string, number> = {}
  try {
    const run = `workspace_id = {ws:String} AND JSONExtractString(properties, 'run') = {tag:String}`
    const totals = await ch.client.query({
      query: `SELECT kind, count() AS n FROM ${ch.database}.events FINAL WHERE ${run} GROUP BY kind`,
      query_params: { ws: preloaded.workspace.id, tag },
      format: 'JSONEachRow',
    })
    stored = Object.fromEntries(((await totals.json()) as { kind: string; n: string }[]).map((r) => [r.kind, Number(r.n)]))
    const ids = sample.map((u) => after.get(u)?.id).filter((id): id is number => id !== undefined)
    const perProfile = await ch.client.query({
      query: `SELECT profile_id, kind, count() AS n FROM ${ch.database}.events FINAL WHERE ${run} AND profile_id IN {ids:Array(UInt64)} GROUP BY profile_id, kind`,
      query_params: { ws: preloaded.workspace.id, tag, ids },
      format: 'JSONEachRow',
    })
    const counts = new Map<string, number>()
    for (const r of (await perProfile.json()) as { profile_id: string; kind: string; n: string }[]) counts.set(`${r.profile_id}:${r.kind}`, Number(r.n))
    for (const u of sample) {
      const id = after.get(u)?.id
      if (id === undefined) continue
      const e = expected.get(u)!
      const events = counts.get(`${id}:event`) ?? 0
      const purchases = counts.get(`${id}:purchase`) ?? 0
      if (events !== e.events) bad(u, `${events} events, expected ${e.events}`)
      if (purchases !== e.purchases) bad(u, `${purchases} purchases, expected ${e.purchases}`)
    }
  } finally {
    await ch.close()
  }
  const eventsStored = stored.event ?? 0
  const purchasesStored = stored.purchase ?? 0
  if (eventsStored !== eventsExpected) mismatches.unshift(`${eventsStored} events stored, expected ${eventsExpected}`)
  if (purchasesStored !== purchasesExpected) mismatches.unshift(`${purchasesStored} purchases stored, expected ${purchasesExpected}`)
  return {
    sampledUsers: sample.length,
    mismatches: mismatches.length,
    examples: mismatches.slice(0, 10),
    loginsAdded: opts.loginsAdded,
    loginsExpected,
    eventsStored,
    eventsExpected,
    purchasesStored,
    purchasesExpected,
    exact: mismatches.length === 0,
  }
}
