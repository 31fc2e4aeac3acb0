import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // What a test prints (the fuzz tallies, the reliability figures, failures provoked on purpose
    // and logged by a library) shows with that test's failure only; --silent=false shows it all.
    silent: 'passed-only',
    env: {
      // The AWS SDK's notice that its later releases need Node 22, printed by every process that
      // makes an S3 client; the helpers that start service processes pass it on.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    reporters: ['default', 'json'],
    outputFile: { json: '.data/test-results.json' },
  },
})
