// The API's CPU to validate a full-size /users/track request: the handler's checks of
// the body (trackBodyOf) and of each object (parseTrackObjects), in this process, without HTTP,
// the JSON parse or the enqueue. Each request holds 75 attributes objects of 14 members (an
// external_id, ten standard fields, three custom attributes: {inc}, {add} and a plain value),
// 75 events with nested properties and 75 purchases. Checking a time zone builds an
// Intl.DateTimeFormat, which costs more than the rest of an object, so the same requests are also
// measured without time_zone.
// Usage: tsx bench/validation.ts [requests per round] [rounds]. Prints one JSON line.
import { parseTrackObjects, trackBodyOf } from '../services/api/routes/users-track.js'

const REQUESTS = Number(process.argv[2] ?? 2_000)
const ROUNDS = Number(process.argv[3] ?? 7)
const PER_KIND = 75
const DISTINCT = 64

function body(i: number, timeZone: boolean): unknown {
  const time = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString()
  const user = (j: number) => `user-${i * PER_KIND + j}`
  return {
    attributes: Array.from({ length: PER_KIND }, (_, j) => ({
      external_id: user(j),
      email: `User.${i}.${j}@Example.com`,
      first_name: `First${j}`,
      last_name: 'Last',
      gender: j % 2 ? 'f' : 'M',
      dob: '1990-02-28',
      home_city: 'Berlin',
      country: 'de',
      language: 'DE',
      ...(timeZone && { time_zone: 'Europe/Berlin' }),
      email_subscribe: 'opted_in',
      score: { inc: 1 },
      tags: { add: ['a', `t${j % 5}`] },
      plan: j % 2 ? 'gold' : 'free',
    })),
    events: Array.from({ length: PER_KIND }, (_, j) => ({
      external_id: user(j),
      app_id: 'app-1',
      name: 'played',
      time,
      properties: { level: j % 10, source: 'bench', items: [{ id: 1, tags: ['x', 'y'] }, { id: 2, tags: [] }], meta: { a: { b: true } } },
    })),
    purchases: Array.from({ length: PER_KIND }, (_, j) => ({
      external_id: user(j),
      product_id: `sku-${j % 7}`,
      currency: 'usd',
      price: 1.5 + j,
      quantity: 1 + (j % 3),
      time,
      properties: { color: 'red', size: j % 4 },
    })),
  }
}

/** One request through the handler's validation; answers the objects accepted. */
function validate(raw: unknown): number {
  const { attributes, events, purchases, errors } = parseTrackObjects(trackBodyOf(raw))
  if (errors.length) throw new Error(`a benchmark object was refused: ${errors[0].message}`)
  return attributes.length + events.length + purchases.length
}

function round(bodies: unknown[], requests: number): { wallUs: number; cpuUs: number } {
  const cpu = process.cpuUsage()
  const start = performance.now()
  let objects = 0
  for (let i = 0; i < requests; i++) objects += validate(bodies[i % bodies.length])
  const wallUs = ((performance.now() - start) * 1000) / requests
  const used = process.cpuUsage(cpu)
  if (objects !== requests * 3 * PER_KIND) throw new Error(`accepted ${objects} objects, expected ${requests * 3 * PER_KIND}`)
  return { wallUs, cpuUs: (used.user + used.system) / requests }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const r1 = (x: number) => Math.round(x * 10) / 10

/** The median wall and CPU time per request over the rounds, after a warm-up round. */
function measure(timeZone: boolean) {
  const bodies = Array.from({ length: DISTINCT }, (_, i) => body(i, timeZone))
  round(bodies, Math.max(200, REQUESTS / 4))
  const rounds = Array.from({ length: ROUNDS }, () => round(bodies, REQUESTS))
  return { usPerRequest: r1(median(rounds.map((r) => r.wallUs))), cpuUsPerRequest: r1(median(rounds.map((r) => r.cpuUs))) }
}

console.log(JSON.stringify({ requests: REQUESTS, rounds: ROUNDS, objectsPerRequest: 3 * PER_KIND, full: measure(true), withoutTimeZone: measure(false) }))
