import { randomUUID } from 'node:crypto'
import { query, type Queryable } from '../pool.js'

export interface SegmentRecord {
  id: string
  workspace_id: string
  name: string
  filter: unknown
}

export async function createSegment(
  db: Queryable,
  input: { workspaceId: string; name: string; filter: unknown },
): Promise<SegmentRecord | undefined> {
  const r = await query<SegmentRecord>(
    db,
    'createSegment',
    `INSERT INTO segments (id, workspace_id, name, filter) VALUES ($1, $2, $3, $4)
     ON CONFLICT (workspace_id, name) DO NOTHING RETURNING id, workspace_id, name, filter`,
    [randomUUID(), input.workspaceId, input.name, JSON.stringify(input.filter)],
  )
  return r.rows[0]
}

export async function getSegment(db: Queryable, workspaceId: string, id: string): Promise<SegmentRecord | undefined> {
  const r = await query<SegmentRecord>(
    db,
    'getSegment',
    'SELECT id, workspace_id, name, filter FROM segments WHERE workspace_id = $1 AND id = $2',
    [workspaceId, id],
  )
  return r.rows[0]
}
