import type { Pool } from '../shared/db/pool.js'
import { existingWorkspaces } from '../shared/db/repositories/workspace-repository.js'

/**
 * The workspaces this process's database knows. A job naming another can only come from another
 * deployment sharing the Redis prefix: it fails loudly, never reported done. Workspaces are never
 * deleted, so a known one stays known; an unknown one is asked again each time.
 */
export class KnownWorkspaces {
  private readonly known = new Set<string>()

  constructor(private readonly pg: Pool) {}

  /** The ids among `ids` this database does not know. */
  async unknownOf(ids: Iterable<string>): Promise<Set<string>> {
    const asked = [...new Set(ids)].filter((id) => !this.known.has(id))
    if (asked.length === 0) return new Set()
    const found = await existingWorkspaces(this.pg, asked)
    for (const id of found) this.known.add(id)
    return new Set(asked.filter((id) => !found.has(id)))
  }
}
