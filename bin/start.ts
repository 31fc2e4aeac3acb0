/**
 * `npm run start:api` / `npm run start:worker [queues...]`: one service process, started as `make
 * run` starts its children (bin/process-flags.ts: Node flags, allocator settings, which take effect
 * only from a process's start). SIGINT/SIGTERM are passed on; the launcher exits with the child.
 */
import { spawn } from 'node:child_process'
import { serviceCommand, serviceProcessEnv } from './process-flags.js'

const [node, ...args] = serviceCommand(process.argv.slice(2))
const child = spawn(node, args, { env: serviceProcessEnv(process.env), stdio: ['pipe', 'inherit', 'inherit'] })
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
