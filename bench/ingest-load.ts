// The full-size ingest load, shared by the ingest benchmark and the raw floor:
// requests of 75 attributes + 75 events + 75 purchases, request i naming users 75i .. 75i+74.

export const PER_KIND = 75

/** 1,333 requests for 100,000 users: each user once. */
export function requestsFor(users: number): number {
  return Math.max(1, Math.floor(users / PER_KIND))
}

/** Request i of the load, its users named `${prefix}${n}` (a prefix per run keeps them new). */
export function trackBody(i: number, users: number, prefix: string): string {
  const ids = Array.from({ length: PER_KIND }, (_, j) => `${prefix}${(i * PER_KIND + j) % users}`)
  const time = new Date(Date.now() - (i % 1000) * 1000).toISOString()
  return JSON.stringify({
    attributes: ids.map((u, j) => ({ external_id: u, first_name: `n${j}`, score: { inc: 1 }, plan: j % 2 ? 'gold' : 'free' })),
    events: ids.map((u) => ({ external_id: u, name: 'played', time, properties: { level: i % 10, items: [{ id: 1 }] } })),
    purchases: ids.map((u) => ({ external_id: u, product_id: 'sku-1', currency: 'USD', price: 1.5, quantity: 1, time })),
  })
}

/** Attributes of `users` new users that name `city` as their home city, 75 a request: the members of one segment. */
export function cityBodies(users: number, prefix: string, city: string): string[] {
  return Array.from({ length: Math.ceil(users / PER_KIND) }, (_, i) => {
    const ids = Array.from({ length: Math.min(PER_KIND, users - i * PER_KIND) }, (_, j) => `${prefix}${i * PER_KIND + j}`)
    return JSON.stringify({ attributes: ids.map((u) => ({ external_id: u, home_city: city })) })
  })
}

/** A small request: one attribute and one event for one user. */
export function smallBody(user: string): string {
  return JSON.stringify({
    attributes: [{ external_id: user, visits: { inc: 1 } }],
    events: [{ external_id: user, name: 'opened', time: new Date().toISOString() }],
  })
}
