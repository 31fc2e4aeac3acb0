import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMakeRun, type ServiceProcesses } from '../helpers/service-process.js'

/**
 * The README's ten-minute tour, run as written against the service as `make run` starts it: each
 * command in one shell session, its output held to the `# -> ` lines under it (`…` stands for
 * anything). Only the address, the data folder and scratch files are the test's own.
 */
const root = path.resolve(import.meta.dirname, '../..')
let svc: ServiceProcesses
const scratch = mkdtempSync(path.join(os.tmpdir(), 'uds-tour-'))

beforeAll(async () => {
  svc = await startMakeRun()
}, 180_000)

afterAll(async () => {
  await svc?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

interface Step {
  commands: string
  expected: string[]
}

/** The tour's shell block, split into steps: the commands up to a `# -> ` line, then those lines. */
function tourSteps(readme: string): Step[] {
  const from = readme.indexOf('## A ten-minute tour')
  const block = readme.slice(readme.indexOf('```sh\n', from) + 6, readme.indexOf('\n```', readme.indexOf('```sh\n', from)))
  const steps: Step[] = []
  let commands: string[] = []
  for (const line of block.split('\n')) {
    const expectation = /^# -> ?(.*)$/.exec(line)
    if (expectation) {
      if (commands.length) steps.push({ commands: commands.join('\n'), expected: [] })
      commands = []
      steps[steps.length - 1].expected.push(expectation[1])
    } else if (!line.startsWith('#') && line.trim()) commands.push(line)
  }
  return steps
}

const pattern = (expected: string[]) => new RegExp(`^${expected.map((l) => l.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*?')).join('\n')}$`)

/** A shell that keeps its variables between steps; `run` answers one step's output. */
function shell(env: NodeJS.ProcessEnv) {
  const sh = spawn('bash', ['--noprofile', '--norc'], { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  sh.stdout.on('data', (d) => (out += d))
  sh.stderr.on('data', (d) => (err += d))
  let n = 0
  return {
    async run(commands: string): Promise<string> {
      const marker = `@@step-${++n}@@`
      out = ''
      sh.stdin.write(`${commands}\necho ${marker}\n`)
      const deadline = Date.now() + 60_000
      while (!out.includes(marker)) {
        if (Date.now() > deadline) throw new Error(`no answer to:\n${commands}\nstderr: ${err}`)
        await new Promise((r) => setTimeout(r, 20))
      }
      return out.slice(0, out.indexOf(marker)).replace(/\n$/, '')
    },
    stderr: () => err,
    close: () => sh.kill(),
  }
}

describe("the README's tour", () => {
  it('does what the README says, step by step', async () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8')
    const base = svc.apis[0]
    // The README's machine is the test's service: its address, data folder and scratch files.
    const ours = (text: string) =>
      text
        .replaceAll('/tmp/', `${scratch}/`)
        .replaceAll('http://127.0.0.1:3000', base)
        .replaceAll('./.data/', `${svc.dataDir}/`)
        .replaceAll(' .data/', ` ${svc.dataDir}/`)
    const steps = tourSteps(readme)
    expect(steps.length).toBeGreaterThanOrEqual(8)
    const sh = shell({ PATH: process.env.PATH, HOME: process.env.HOME, PUBLIC_URL: base, DATA_DIR: svc.dataDir })
    try {
      for (const step of steps) {
        const want = pattern(step.expected)
        let got = await sh.run(ours(step.commands))
        // A request's progress, read a moment before it is done, is asked again, as a reader would.
        for (let i = 0; i < 40 && !want.test(got) && step.commands.includes('/requests/'); i++) {
          await new Promise((r) => setTimeout(r, 250))
          got = await sh.run(ours(step.commands))
        }
        expect(got, `${ours(step.commands)}\n-> ${step.expected.join('\n')}\nstderr: ${sh.stderr().slice(-4000)}`).toMatch(want)
      }
    } finally {
      sh.close()
    }
  }, 240_000)
})
