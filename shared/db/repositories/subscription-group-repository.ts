import { randomUUID } from 'node:crypto'
import { query, type Queryable } from '../pool.js'

export type Channel = 'email' | 'sms' | 'whatsapp'
export interface SubscriptionGroup {
  id: string
  workspace_id: string
  name: string
  channel: Channel
}

export async function createSubscriptionGroup(
  db: Queryable,
  input: { workspaceId: string; name: string; channel: Channel },
): Promise<SubscriptionGroup | undefined> {
  const r = await query<SubscriptionGroup>(
    db,
    'createSubscriptionGroup',
    `INSERT INTO subscription_groups (id, workspace_id, name, channel) VALUES ($1, $2, $3, $4)
     ON CONFLICT (workspace_id, name) DO NOTHING RETURNING id, workspace_id, name, channel`,
    [randomUUID(), input.workspaceId, input.name, input.channel],
  )
  return r.rows[0]
}

export async function findSubscriptionGroups(db: Queryable, workspaceId: string, ids: string[]): Promise<Map<string, SubscriptionGroup>> {
  if (ids.length === 0) return new Map()
  const r = await query<SubscriptionGroup>(
    db,
    'findSubscriptionGroups',
    'SELECT id, workspace_id, name, channel FROM subscription_groups WHERE workspace_id = $1 AND id = ANY($2::text[])',
    [workspaceId, ids],
  )
  return new Map(r.rows.map((g) => [g.id, g]))
}
