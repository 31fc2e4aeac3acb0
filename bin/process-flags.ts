// How the service's processes are started: by `make run` (run-local.ts), the npm scripts
// (start.ts) and the benchmarks' layouts, which mirror them.
import path from 'node:path'

/** The worker process's CPU priority under `make run`: the API wins the cores when both want them. */
export const WORKER_NICE = 10

/**
 * V8 flags of every service process: a 64 MiB young generation instead of 16. A batch's or a
 * request's objects live across several awaits; with the default they outlived scavenges and
 * were copied and promoted (README, Performance).
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=64']

/**
 * Memory allocator settings of every service process; an operator's own value of either variable
 * wins. Memory a process hands back to the OS is faulted in again page by page when it is next
 * used, and on the VM the benchmarks run on a page fault costs 12-21 us of CPU: under the mixed
 * load they were a quarter of the worker's CPU (README, Production notes and Mixed load).
 * - glibc (Node's buffers, strings passed to native code): blocks below 32 MiB come from the heap
 *   rather than from an mmap of their own unmapped on free, and the heap is not trimmed below 1 GiB.
 * - the embedded engine's jemalloc (libchdb): freed pages are kept 30 s instead of ClickHouse's 5.
 */
export const SERVICE_ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864',
  JE_MALLOC_CONF: 'dirty_decay_ms:30000',
}

/** A service process's environment: the allocator settings under `env`. */
export const serviceProcessEnv = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...SERVICE_ALLOCATOR_ENV, ...env })

const MAIN = path.join(import.meta.dirname, 'main.ts')
const EXIT_WITH_PARENT = path.join(import.meta.dirname, 'exit-with-parent.ts')

/**
 * The command line of a service process started by a launcher (`main.ts <args>`): the loader flags
 * the launcher was started with (tsx), the service's Node flags, and an exit when the launcher dies.
 */
export const serviceCommand = (args: string[]): string[] => [process.execPath, ...process.execArgv, ...SERVICE_NODE_FLAGS, '--import', EXIT_WITH_PARENT, MAIN, ...args]
