import type { ClickHouse } from '../shared/clickhouse/client.js'
import type { Config } from '../shared/config.js'
import type { Pool } from '../shared/db/pool.js'
import type { Logger } from '../shared/logger.js'
import type { Metrics } from '../shared/metrics.js'
import type { Producer } from '../shared/queue/jobs.js'

/** What processors may use. */
export interface WorkerDeps {
  config: Config
  logger: Logger
  pg: Pool
  clickhouse: ClickHouse
  producer: Producer
  metrics: Metrics
  /**
   * Resolves once no ClickHouse read of the API is running in this process (at most a second
   * later): work that writes the history awaits it between its steps, so a read has the cores.
   */
  readsFirst: () => Promise<void>
}
