import { describe, expect, it } from 'vitest'
import { eventRowsOf } from '../../../workers/track/processor.js'
import type { TrackJob } from '../../../shared/queue/track-jobs.js'

const time = '2024-05-01T12:00:00.000Z'
const job: TrackJob = {
  workspaceId: 'ws',
  requestId: 'req-1',
  attributes: [],
  events: [
    { index: 0, identifier: { kind: 'external_id', value: 'a' }, name: 'opened', time, properties: { level: 2 } },
    { index: 3, identifier: { kind: 'external_id', value: 'b' }, name: 'played', time, properties: {}, app_id: 'app' },
  ],
  purchases: [{ index: 1, identifier: { kind: 'external_id', value: 'a' }, product_id: 'sku', currency: 'USD', price: 2.5, quantity: 2, time, properties: {} }],
  subscriptionChanges: [],
  emailStateChanges: [],
}

describe('eventRowsOf', () => {
  it('names each occurrence by its request, kind and index in the request, owned as resolved', () => {
    expect([...eventRowsOf(job, [7, 8, 7])]).toEqual([
      { workspace_id: 'ws', profile_id: 7, event_id: 'req-1:e:0', kind: 'event', name: 'opened', app_id: '', time, properties: '{"level":2}', currency: '', price: 0, quantity: 0 },
      { workspace_id: 'ws', profile_id: 8, event_id: 'req-1:e:3', kind: 'event', name: 'played', app_id: 'app', time, properties: '{}', currency: '', price: 0, quantity: 0 },
      { workspace_id: 'ws', profile_id: 7, event_id: 'req-1:p:1', kind: 'purchase', name: 'sku', app_id: '', time, properties: '{}', currency: 'USD', price: 2.5, quantity: 2 },
    ])
  })

  it('stores properties sent as JSON text as they are, and those of jobs queued with an object as its JSON', () => {
    const text = '{"b":1,"a":{"x":[1,"\\u00e9"]}}'
    const rows = [...eventRowsOf({ ...job, events: [{ ...job.events[0], properties: text }, { ...job.events[1], properties: { z: [1, 'é'] } }] }, [7, 8, 7])]
    expect(rows.map((r) => r.properties)).toEqual([text, '{"z":[1,"é"]}', '{}'])
  })

  it('leaves out occurrences whose user was not found', () => {
    expect([...eventRowsOf(job, [null, 8, null])].map((r) => r.event_id)).toEqual(['req-1:e:3'])
  })
})
