import { describe, expect, it } from 'vitest'
import { SharedRuns } from '../../../shared/clickhouse/reads.js'

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
