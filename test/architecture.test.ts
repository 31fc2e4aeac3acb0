import { fileURLToPath } from 'node:url'
import { cruise, type ICruiseResult } from 'dependency-cruiser'
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options'
import { describe, expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))
const config = fileURLToPath(new URL('./dependency-cruiser.mjs', import.meta.url))

/** One line per forbidden arrow, naming the rule and the imports; a circle lists every file on it. */
function describeViolations(result: ICruiseResult): string[] {
  return result.summary.violations.map((v) => {
    const arrow = v.cycle?.length ? [v.from, ...v.cycle.map((c) => c.name)].join(' -> ') : `${v.from} -> ${v.to}`
    return `${v.rule.name}: ${arrow}`
  })
}

describe('the import graph of services/, workers/, shared/ and bin/', () => {
  it('has no circle and no arrow the architecture forbids (test/dependency-cruiser.mjs)', async () => {
    const options = await extractDepcruiseOptions(config)
    const { output } = await cruise(['services', 'workers', 'shared', 'bin'], { ...options, baseDir: repoRoot })
    const result = output as ICruiseResult

    // The cruise saw the tree, type-only imports included: a route's `import type` of its operation type.
    const health = result.modules.find((m) => m.source === 'services/api/routes/health.ts')
    expect(health?.dependencies.map((d) => d.resolved)).toContain('services/api/api-operation.ts')
    expect(result.summary.totalCruised).toBeGreaterThan(100)

    expect(describeViolations(result)).toEqual([])
  })
})
