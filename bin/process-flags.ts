// How the service's processes are started: by `make run` (run-local.ts) and by the benchmarks'
// layouts, which mirror it.

/** The worker process's CPU priority under `make run`: the API wins the cores when both want them. */
export const WORKER_NICE = 10

/**
 * V8 flags of every service process: a 64 MiB young generation instead of 16. A batch's or a
 * request's objects live across several awaits; with the default they outlived scavenges and
 * were copied and promoted (README, Performance).
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=64']
