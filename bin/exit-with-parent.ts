/**
 * Preloaded (`--import`) into each process bin/run-local.ts starts. Its stdin is a pipe whose other
 * end only the supervisor holds, so the end of stdin means the supervisor is gone, even by kill -9:
 * the process then stops as on SIGTERM instead of living on as an orphan that keeps the port and
 * the embedded engine.
 */
const stop = () => process.kill(process.pid, 'SIGTERM')
process.stdin.on('end', stop)
process.stdin.on('error', stop)
process.stdin.resume()
// Watching stdin must not keep an otherwise finished process alive.
;(process.stdin as { unref?: () => void }).unref?.()
