import { spawn } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

const root = path.resolve(import.meta.dirname, '../..')

/** Runs a script that logs through createLogger's standard output; answers its stdout lines as they arrived (ms after start). */
function run(script: string, stopAfterMs: number): Promise<{ at: number; line: string }[]> {
  const code = `import { createLogger } from './shared/logger.ts'\nconst logger = createLogger('info')\n${script}`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] })
  const started = performance.now()
  const lines: { at: number; line: string }[] = []
  let partial = ''
  child.stdout!.on('data', (d: Buffer) => {
    const parts = (partial + d.toString()).split('\n')
    partial = parts.pop()!
    for (const line of parts) lines.push({ at: performance.now() - started, line })
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), stopAfterMs)
  return new Promise((resolve) => child.on('close', () => (clearTimeout(timer), resolve(lines))))
}

describe('createLogger to standard output', () => {
  it('writes a lone line within about a second, whatever else is logged', async () => {
    // One line, then marks written straight to stdout every 100 ms until the process is killed.
    const lines = await run(`logger.info({ n: 1 }, 'lone'); setInterval(() => process.stdout.write('mark\\n'), 100)`, 6000)
    const lone = lines.find((l) => l.line.startsWith('{'))
    const firstMark = lines.find((l) => l.line === 'mark')
    expect(lone && JSON.parse(lone.line)).toMatchObject({ n: 1, msg: 'lone' })
    // Written by the periodic flush about a second after it was logged, not at exit (the process was killed).
    expect(lone!.at - firstMark!.at).toBeLessThan(2000)
  })

  it('writes every buffered line when the process exits', async () => {
    const lines = await run(`for (let i = 0; i < 5000; i++) logger.info({ i }, 'line'); process.exit(0)`, 20_000)
    const logged = lines.filter((l) => l.line.startsWith('{')).map((l) => JSON.parse(l.line).i as number)
    expect(logged).toEqual(Array.from({ length: 5000 }, (_, i) => i))
  })
})
