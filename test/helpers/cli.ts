import { spawn } from 'node:child_process'
import path from 'node:path'

const ROOT = path.resolve(import.meta.dirname, '../..')
const TSX = path.join(ROOT, 'node_modules/.bin/tsx')
const CLI = path.join(ROOT, 'services/cli/index.ts')

export interface CliRun {
  code: number | null
  stdout: string
  stderr: string
  /** stdout read as JSON (`--json`); undefined when it is not JSON. */
  json: any
}

/** The environment of a child without the variables the CLI would otherwise pick up from ours. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { ADMIN_TOKEN: _t, PUBLIC_URL: _u, DATA_DIR: _d, API_KEY: _k, ...rest } = process.env
  return { ...rest, ...extra }
}

/** The operator CLI in a child process, as a person at a shell runs it. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [CLI, ...args], { cwd: ROOT, env })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => {
      let json: unknown
      try {
        json = JSON.parse(stdout)
      } catch {
        json = undefined
      }
      resolve({ code, stdout, stderr, json })
    })
  })
}
