import { isoText, query, type Queryable } from '../pool.js'

/** The per-workspace suppression lists the service keeps. */
export type EmailList = 'spam' | 'bounce'

// Closed set: the table is chosen by the list kind, never by request text.
const tableOf: Record<EmailList, string> = { spam: 'email_spam_list', bounce: 'email_bounce_list' }

export interface EmailListEntry {
  email: string
  added_at: string
}

/** Adds addresses (already normalized); returns how many were not on the list yet. */
export async function addToEmailList(db: Queryable, workspaceId: string, list: EmailList, emails: string[]): Promise<number> {
  if (emails.length === 0) return 0
  const r = await query(
    db,
    'addToEmailList',
    `INSERT INTO ${tableOf[list]} (workspace_id, email) SELECT $1, e FROM unnest($2::text[]) AS e ON CONFLICT DO NOTHING`,
    [workspaceId, emails],
  )
  return r.rowCount ?? 0
}

/** Removes addresses; returns those that were on the list. */
export async function removeFromEmailList(db: Queryable, workspaceId: string, list: EmailList, emails: string[]): Promise<string[]> {
  if (emails.length === 0) return []
  const r = await query<{ email: string }>(
    db,
    'removeFromEmailList',
    `DELETE FROM ${tableOf[list]} WHERE workspace_id = $1 AND email = ANY($2::text[]) RETURNING email`,
    [workspaceId, emails],
  )
  return r.rows.map((x) => x.email).sort()
}

/** One page of a list in address order, starting after `after`. */
export async function listEmailList(
  db: Queryable,
  workspaceId: string,
  list: EmailList,
  page: { after?: string; limit: number },
): Promise<EmailListEntry[]> {
  const r = await query<EmailListEntry>(
    db,
    'listEmailList',
    `SELECT email, ${isoText('added_at')} AS added_at FROM ${tableOf[list]}
      WHERE workspace_id = $1 AND ($2::text IS NULL OR email > $2) ORDER BY email LIMIT $3`,
    [workspaceId, page.after ?? null, page.limit],
  )
  return r.rows
}
