import { describe, expect, it } from 'vitest'
import { clickhouseConnectionsFor } from '../../../shared/clickhouse/connections.js'

describe('ClickHouse connections by role', () => {
  const sized = (api: boolean, workers: ('track' | 'identity' | 'export' | 'callback')[]) => clickhouseConnectionsFor({ api, workers, partitions: 4, concurrency: 4 })

  it('gives the API its reads, a writing worker an insert per table in flight plus its batches, an export worker a page per export', () => {
    expect(sized(true, [])).toBe(6)
    expect(sized(false, ['track'])).toBe(3 + 4)
    expect(sized(false, ['identity'])).toBe(3 + 1)
    expect(sized(false, ['track', 'identity'])).toBe(3 + 4 + 1)
    expect(sized(false, ['export'])).toBe(4)
    expect(sized(false, ['callback'])).toBe(1)
    expect(sized(true, ['track', 'identity', 'export', 'callback'])).toBe(6 + 3 + 4 + 1 + 4)
  })
})
