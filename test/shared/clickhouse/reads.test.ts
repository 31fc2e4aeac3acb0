import { describe, expect, it } from 'vitest'
import { MergedReads, SharedRuns } from '../../../shared/clickhouse/reads.js'

/** A read whose runs are numbered in start order and end when the test says. */
function controlledRead() {
  const started: { n: number; finish: (v: number) => void; fail: (e: Error) => void }[] = []
  const read = () =>
    new Promise<number>((finish, fail) => {
      started.push({ n: started.length + 1, finish, fail })
    })
  return { started, read }
}

const tick = () => new Promise((r) => setTimeout(r, 0))

describe('SharedRuns', () => {
  it('answers reads arriving during a run from one next run, started after they arrived', async () => {
    const runs = new SharedRuns<number>()
    const { started, read } = controlledRead()
    const first = runs.run('k', read)
    await tick()
    expect(started.length).toBe(1)

    const during = [runs.run('k', read), runs.run('k', read), runs.run('k', read)]
    await tick()
    expect(started.length).toBe(1) // nothing new starts while the first run is going

    started[0].finish(10)
    expect(await first).toBe(10)
    await tick()
    expect(started.length).toBe(2) // one run for the three that arrived meanwhile
    started[1].finish(20)
    expect(await Promise.all(during)).toEqual([20, 20, 20])

    // Idle again: the next read starts its own run.
    const later = runs.run('k', read)
    await tick()
    expect(started.length).toBe(3)
    started[2].finish(30)
    expect(await later).toBe(30)
  })

  it('starts the next run after a failed one, and gives the failure only to the reads of that run', async () => {
    const runs = new SharedRuns<number>()
    const { started, read } = controlledRead()
    const first = runs.run('k', read)
    await tick()
    const second = runs.run('k', read)
    started[0].fail(new Error('engine went away'))
    await expect(first).rejects.toThrow('engine went away')
    await tick()
    expect(started.length).toBe(2)
    started[1].finish(7)
    expect(await second).toBe(7)
  })

  it('runs different keys side by side', async () => {
    const runs = new SharedRuns<number>()
    const { started, read } = controlledRead()
    const a = runs.run('a', read)
    const b = runs.run('b', read)
    await tick()
    expect(started.length).toBe(2)
    started[1].finish(2)
    started[0].finish(1)
    expect([await a, await b]).toEqual([1, 2])
  })
})

describe('MergedReads', () => {
  /** A query whose runs are recorded with the ids they asked for, each answering id -> id * 10 when the test says. */
  function controlledQuery() {
    const runs: { workspaceId: string; ids: number[]; finish: () => void; fail: (e: Error) => void }[] = []
    const query = (workspaceId: string, ids: number[]) =>
      new Promise<Map<number, number>>((resolve, fail) => {
        runs.push({ workspaceId, ids: [...ids].sort((a, b) => a - b), finish: () => resolve(new Map(ids.filter((id) => id !== 99).map((id) => [id, id * 10]))), fail })
      })
    return { runs, query }
  }

  it('answers reads arriving during a run from one next run for all their profiles, each with its own', async () => {
    const { runs, query } = controlledQuery()
    const reads = new MergedReads<number>(query)
    const first = reads.read('ws', [1, 2])
    await tick()
    expect(runs.map((r) => r.ids)).toEqual([[1, 2]])

    const during = [reads.read('ws', [3, 99]), reads.read('ws', [2, 4]), reads.read('other', [5])]
    await tick()
    expect(runs.length).toBe(2) // the other workspace's read starts at once; this one's wait for the run going

    runs[0].finish()
    expect(await first).toEqual(new Map([[1, 10], [2, 20]]))
    await tick()
    expect(runs.map((r) => [r.workspaceId, r.ids])).toEqual([['ws', [1, 2]], ['other', [5]], ['ws', [2, 3, 4, 99]]])
    runs[1].finish()
    runs[2].finish()
    // Each read gets only its own profiles; one without a value is left out.
    expect(await Promise.all(during)).toEqual([new Map([[3, 30]]), new Map([[2, 20], [4, 40]]), new Map([[5, 50]])])
  })

  it('starts the next run after a failed one, and gives the failure only to the reads of that run', async () => {
    const { runs, query } = controlledQuery()
    const reads = new MergedReads<number>(query)
    const failing = reads.read('ws', [1])
    await tick()
    const next = reads.read('ws', [2])
    runs[0].fail(new Error('engine gone'))
    await expect(failing).rejects.toThrow('engine gone')
    await tick()
    expect(runs.map((r) => r.ids)).toEqual([[1], [2]])
    runs[1].finish()
    expect(await next).toEqual(new Map([[2, 20]]))
  })
})
