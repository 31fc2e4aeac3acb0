// The mixed load, what real senders send: requests of 75 attributes + 75 events +
// 75 purchases, each object naming a different user drawn at random from 100,000 (225 users a
// request, spread over every partition). Deterministic from a seed, so the generator can say what
// every profile must hold after a run.
//
// User u (0 .. 99,999) is always named the same way: 70% by external_id, 10% by user_alias, 10% by
// email, 10% by phone. Users below 90,000 exist before the load: p<u+1> of the preloaded workspace
// (by external_id or its preloaded email), or, for alias and phone users, made so by `setupBodies`
// (an alias-only profile; the phone set on p<u+1>), which also makes again a p<u+1> an earlier
// part merged away or deleted (the identity part takes ~42,000 of them). Users from 90,000 up are
// new in each run (their names carry the run's tag), named by external_id or email, both of which
// create a profile.
//
// Every attribute a user gets is a function of the user alone, so the result does not depend on
// the order in which concurrent requests were accepted; what accumulates (`logins` {inc: 1}, the
// `tags` array {add}, events and purchases) is counted by `expected`.

export const MIXED_PER_KIND = 75
export const MIXED_USERS = 100_000
/** Users from here up are new in every run. */
export const FIRST_NEW_USER = 90_000
export const ALIAS_LABEL = 'bench'

type Kind = 'external_id' | 'user_alias' | 'email' | 'phone'
type IdentifierFields = Record<string, unknown>

/** mulberry32: small, fast, and the same sequence on every machine. */
function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function kindOf(u: number): Kind {
  const k = u % 20
  const kind: Kind = k < 14 ? 'external_id' : k < 16 ? 'user_alias' : k < 18 ? 'email' : 'phone'
  // New users are named by identifiers that create a profile by default.
  if (u >= FIRST_NEW_USER && (kind === 'user_alias' || kind === 'phone')) return 'external_id'
  return kind
}

/** A valid French mobile number, one per user. */
export const phoneOf = (u: number) => `+336${String(u).padStart(8, '0')}`

/** The preloaded profile an existing user u (below FIRST_NEW_USER) stands for, by its external id. */
const preloadedIdOf = (u: number) => `p${u + 1}`

export function emailOf(u: number, tag: string): string {
  if (u >= FIRST_NEW_USER) return `n${tag}-${u}@bench.example`
  return kindOf(u) === 'user_alias' ? `ma${u}@bench.example` : `${preloadedIdOf(u)}@example.com`
}

/** The identifier fields of user u in an object of the load. */
export function identifierOf(u: number, tag: string): IdentifierFields {
  const kind = kindOf(u)
  if (u >= FIRST_NEW_USER) return kind === 'email' ? { email: emailOf(u, tag) } : { external_id: `n${tag}-${u}` }
  if (kind === 'external_id') return { external_id: preloadedIdOf(u) }
  if (kind === 'user_alias') return { user_alias: { alias_name: `ma${u}`, alias_label: ALIAS_LABEL } }
  if (kind === 'email') return { email: emailOf(u, tag) }
  return { phone: phoneOf(u) }
}

const CITIES = ['Paris', 'Lyon', 'Berlin', 'Madrid', 'Lisbon', 'Rome', 'Oslo', 'Dublin']
const COUNTRIES = ['FR', 'DE', 'ES', 'PT', 'IT', 'IE']
const LANGUAGES = ['fr', 'de', 'es', 'pt', 'it']
const PLANS = ['free', 'pro', 'enterprise']
const EVENT_NAMES = ['viewed_item', 'added_to_cart', 'searched', 'opened_app', 'shared']

/** The values an attribute object sets for user u, all functions of u: the order of requests cannot change them. */
export function attributesOf(u: number, tag: string) {
  return {
    first_name: `F${u}`,
    last_name: `L${u % 1000}`,
    home_city: CITIES[u % CITIES.length],
    country: COUNTRIES[u % COUNTRIES.length],
    language: LANGUAGES[u % LANGUAGES.length],
    email: emailOf(u, tag),
    plan: PLANS[u % PLANS.length],
    lifetime_value: (u % 500) + 0.5,
    vip: u % 7 === 0,
    signed_up_at: new Date(Date.UTC(2024, u % 12, (u % 28) + 1)).toISOString(),
  }
}

/** The array value request i adds for user u. */
const tagOf = (i: number) => `t${i % 4}`

export interface MixedRequest {
  attributeUsers: number[]
  eventUsers: number[]
  purchaseUsers: number[]
}

/** The users of each request: 225 distinct users a request, drawn from the seed. */
export function mixedUsers(requests: number, seed = 22): MixedRequest[] {
  const next = rng(seed)
  const out: MixedRequest[] = []
  for (let i = 0; i < requests; i++) {
    const seen = new Set<number>()
    while (seen.size < MIXED_PER_KIND * 3) seen.add(Math.floor(next() * MIXED_USERS))
    const users = [...seen]
    out.push({
      attributeUsers: users.slice(0, MIXED_PER_KIND),
      eventUsers: users.slice(MIXED_PER_KIND, 2 * MIXED_PER_KIND),
      purchaseUsers: users.slice(2 * MIXED_PER_KIND),
    })
  }
  return out
}

/**
 * The JSON text each user of a run's tag opens its objects with: its identifier (and, on its
 * attributes object, the values attributesOf gives it). Made once per user: the soak sends bodies
 * as it goes, and building each one whole cost ~3 ms, a third of a core taken from the service
 * and late sends counted as its latency.
 */
class UserTexts {
  private readonly identifiers = new Map<number, string>()
  private readonly attributes = new Map<number, string>()

  constructor(readonly tag: string) {}

  /** `"external_id":"p1"`: the members identifierOf gives, without braces. */
  identifier(u: number): string {
    let text = this.identifiers.get(u)
    if (text === undefined) this.identifiers.set(u, (text = JSON.stringify(identifierOf(u, this.tag)).slice(1, -1)))
    return text
  }

  /** The identifier, the alias users' `_update_existing_only` and attributesOf's members, without braces. */
  attributeHead(u: number): string {
    let text = this.attributes.get(u)
    if (text === undefined) {
      const head = { ...identifierOf(u, this.tag), ...(kindOf(u) === 'user_alias' ? { _update_existing_only: false } : {}), ...attributesOf(u, this.tag) }
      this.attributes.set(u, (text = JSON.stringify(head).slice(1, -1)))
    }
    return text
  }
}

let texts: UserTexts | undefined

/**
 * Request i of the load as its JSON body: attributes objects (attributesOf, one {inc} and one
 * {add}), events with nested properties and purchases, with the same members in the same order
 * as JSON.stringify would give them.
 */
export function mixedBody(r: MixedRequest, i: number, tag: string): string {
  if (texts?.tag !== tag) texts = new UserTexts(tag)
  const users = texts
  const time = JSON.stringify(new Date(Date.now() - (i % 1000) * 1000).toISOString())
  const run = JSON.stringify(tag)
  const attributes = r.attributeUsers.map((u) => `{${users.attributeHead(u)},"logins":{"inc":1},"tags":{"add":["${tagOf(i)}"]}}`)
  const events = r.eventUsers.map(
    (u, j) =>
      `{${users.identifier(u)},"app_id":"bench-app","name":"${EVENT_NAMES[(i + j) % EVENT_NAMES.length]}","time":${time},` +
      `"properties":{"run":${run},"item":{"id":"i${(i * 7 + j) % 5000}","category":"${CITIES[j % CITIES.length]}","price":${(j % 40) + 0.99}},` +
      `"context":{"screen":"home","referrer":"${j % 3 ? 'push' : 'email'}"},"lines":[{"sku":"s${j % 50}","qty":${(j % 3) + 1}}]}}`,
  )
  const purchases = r.purchaseUsers.map(
    (u, j) =>
      `{${users.identifier(u)},"app_id":"bench-app","product_id":"sku-${(i + j) % 50}","currency":"EUR","price":${((i + j) % 200) + 0.5},` +
      `"quantity":${(j % 3) + 1},"time":${time},"properties":{"run":${run},"coupon":${j % 5 ? 'null' : '"WELCOME"'}}}`,
  )
  return `{"attributes":[${attributes.join(',')}],"events":[${events.join(',')}],"purchases":[${purchases.join(',')}]}`
}

/** The preloaded profile (external id) of each existing user named by external_id, email or phone. */
export function preloadedExternalIds(): string[] {
  const ids: string[] = []
  for (let u = 0; u < FIRST_NEW_USER; u++) if (kindOf(u) !== 'user_alias') ids.push(preloadedIdOf(u))
  return ids
}

/**
 * Made before the load (and not measured): an alias-only profile for each existing alias user,
 * each existing phone user's phone on its profile, and each preloaded profile in `gone` (merged
 * away or deleted by an earlier part) made again as the preload had it, so that the load's
 * existing users exist whatever ran before it.
 */
export function setupBodies(gone: ReadonlySet<string> = new Set()): string[] {
  const objects: Record<string, unknown>[] = []
  for (let u = 0; u < FIRST_NEW_USER; u++) {
    const kind = kindOf(u)
    if (kind === 'user_alias') {
      objects.push({ ...identifierOf(u, ''), _update_existing_only: false })
      continue
    }
    const externalId = preloadedIdOf(u)
    const asPreloaded = { external_id: externalId, email: emailOf(u, '') }
    if (kind === 'phone') objects.push({ ...(gone.has(externalId) ? asPreloaded : { external_id: externalId }), phone: phoneOf(u) })
    else if (gone.has(externalId)) objects.push(asPreloaded)
  }
  const bodies: string[] = []
  for (let k = 0; k < objects.length; k += MIXED_PER_KIND) bodies.push(JSON.stringify({ attributes: objects.slice(k, k + MIXED_PER_KIND) }))
  return bodies
}

export interface Expected {
  attributeObjects: number
  events: number
  purchases: number
  /** The array values the load adds. */
  tags: Set<string>
}

/** What the load does to each user it names; `accepted` leaves out requests the service refused (by index). */
export function expected(requests: MixedRequest[], accepted: (i: number) => boolean = () => true): Map<number, Expected> {
  const m = new Map<number, Expected>()
  const of = (u: number) => {
    let e = m.get(u)
    if (!e) m.set(u, (e = { attributeObjects: 0, events: 0, purchases: 0, tags: new Set() }))
    return e
  }
  requests.forEach((r, i) => {
    if (!accepted(i)) return
    for (const u of r.attributeUsers) {
      of(u).attributeObjects++
      of(u).tags.add(tagOf(i))
    }
    for (const u of r.eventUsers) of(u).events++
    for (const u of r.purchaseUsers) of(u).purchases++
  })
  return m
}
