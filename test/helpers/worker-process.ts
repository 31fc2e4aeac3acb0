import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import type { TestEnv } from './harness.js'

const root = path.resolve(import.meta.dirname, '../..')

/** A worker process of its own (`main.ts worker ...`) on the test env's database and queues, with its own embedded ClickHouse. */
const spawned: ChildProcess[] = []

/** Kills every worker process this test file started that still runs: for afterAll, so a test failing midway leaves none behind. */
export function killSpawnedWorkers(): void {
  for (const child of spawned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

export function spawnWorkerProcess(env: TestEnv, dataDir: string, roles: string[] = ['track'], extraEnv: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/main.ts', 'worker', ...roles], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: env.config.DATABASE_URL,
      REDIS_URL: env.config.REDIS_URL,
      QUEUE_PREFIX: env.config.QUEUE_PREFIX,
      TRACK_PARTITIONS: String(env.config.TRACK_PARTITIONS),
      DATA_DIR: dataDir,
      JOB_LOCK_MS: '2000',
      LOG_LEVEL: 'error',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED,
      ...extraEnv,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  spawned.push(child)
  return child
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode)
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)))
}

/**
 * Runs a helper script under test/helpers in a process of its own and answers the JSON it prints:
 * a stopped worker's embedded ClickHouse can only be opened by another process (chDB binds one
 * data directory per process).
 */
export async function runHelperScript(script: string, args: string[]): Promise<any> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join('test/helpers', script), ...args], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  await exited(child)
  return JSON.parse(out)
}

/** Event counts read from a stopped worker's embedded ClickHouse. */
export async function clickhouseCounts(dataDir: string, database: string, workspaceId: string) {
  return (await runHelperScript('clickhouse-counts.ts', [path.join(dataDir, 'clickhouse'), database, workspaceId])) as {
    visible: { kind: string; n: string }[]
    physical: number
    snapshots: number
    perProfile: { profileId: number; kind: string; name: string; n: number }[]
  }
}

/** How many occurrences of one kind and name each profile has, from `clickhouseCounts` (0 when none). */
export function occurrencesOf(counts: { perProfile: { profileId: number; kind: string; name: string; n: number }[] }, kind: string, name: string) {
  const by = new Map(counts.perProfile.filter((c) => c.kind === kind && c.name === name).map((c) => [c.profileId, c.n]))
  return (profileId: number) => by.get(profileId) ?? 0
}
