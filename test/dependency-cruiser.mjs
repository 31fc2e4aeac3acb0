// The arrows the architecture forbids (STYLE.md "The tree tells the architecture"), checked by
// test/architecture.test.ts; also usable as `npx depcruise --config test/dependency-cruiser.mjs services workers shared bin`.
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import circle, type-only imports included.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'shared-is-common',
      comment: 'shared/ is read by the API, the workers and the entry points; it imports none of them.',
      severity: 'error',
      from: { path: '^shared/' },
      to: { path: '^(services|workers|bin)/' },
    },
    {
      name: 'domain-below-queue',
      comment: 'shared/domain holds the rules the job contracts in shared/queue carry; a contract imports the domain, never the reverse.',
      severity: 'error',
      from: { path: '^shared/domain/' },
      to: { path: '^shared/queue/' },
    },
    {
      name: 'api-not-workers',
      comment: 'The API reaches the workers only through the queue contracts in shared/queue/.',
      severity: 'error',
      from: { path: '^services/api/' },
      to: { path: '^(workers|bin)/' },
    },
    {
      name: 'workers-not-services',
      comment: 'Workers consume the queue contracts in shared/; they import nothing of the services or the entry points.',
      severity: 'error',
      from: { path: '^workers/' },
      to: { path: '^(services|bin)/' },
    },
    {
      name: 'worker-not-another-worker',
      comment: "A worker's folder imports no other worker's folder; what two workers share lives at workers/ or in shared/.",
      severity: 'error',
      from: { path: '^workers/([^/]+)/' },
      to: { path: '^workers/[^/]+/', pathNot: '^workers/$1/' },
    },
    {
      name: 'no-unresolvable',
      comment: 'A relative import the cruise cannot resolve is an arrow it cannot check.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true, path: '^[.]' },
    },
  ],
  options: {
    // TypeScript 7 has no compiler API for dependency-cruiser; swc parses the sources and keeps
    // type-only imports (tsPreCompilationDeps), which make circles as real as value imports.
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
  },
}
