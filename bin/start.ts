/**
 * `npm run start:api` / `npm run start:worker [queues...]`: one service process, started as `make
 * run` starts its children (bin/process-flags.ts: Node flags, allocator settings, which take effect
 * only from a process's start). SIGINT/SIGTERM are passed on; the launcher exits with the child.
 */
import { spawn } from 'node:child_process'
import path from 'node:path'
import { SERVICE_NODE_FLAGS, serviceProcessEnv } from './process-flags.js'

const ROOT = path.resolve(import.meta.dirname, '..')

const child = spawn(
  process.execPath,
  [...process.execArgv, ...SERVICE_NODE_FLAGS, '--import', path.join(ROOT, 'bin/exit-with-parent.ts'), path.join(ROOT, 'bin/main.ts'), ...process.argv.slice(2)],
  { env: serviceProcessEnv(process.env), stdio: ['pipe', 'inherit', 'inherit'] },
)
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
