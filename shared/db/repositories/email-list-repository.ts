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

/** Which entries a query of a list's history asks for: some addresses, or a time range; one page of them. */
export interface EmailListQuery {
  emails?: string[]
  /** [from, to) in ISO 8601, used when no addresses are named. */
  range?: { from: string; to: string }
  descending: boolean
  limit: number
  offset: number
}

/** Hard-bounced addresses with the time they were listed (/email/hard_bounces). */
export async function queryBounceList(db: Queryable, workspaceId: string, q: EmailListQuery): Promise<{ email: string; hard_bounced_at: string }[]> {
  const r = await query<{ email: string; hard_bounced_at: string }>(
    db,
    'queryBounceList',
    `SELECT email, ${isoText('added_at')} AS hard_bounced_at FROM email_bounce_list
      WHERE workspace_id = $1 AND (CASE WHEN $2::text[] IS NOT NULL THEN email = ANY($2::text[]) ELSE added_at >= $3::timestamptz AND added_at < $4::timestamptz END)
      ORDER BY added_at ${q.descending ? 'DESC' : 'ASC'}, email LIMIT $5 OFFSET $6`,
    [workspaceId, q.emails ?? null, q.range?.from ?? null, q.range?.to ?? null, q.limit, q.offset],
  )
  return r.rows
}

/**
 * Unsubscribed addresses with the time they were unsubscribed (/email/unsubscribes): the states
 * stored for addresses (/email/status, /email/blocklist), and the addresses of profiles whose
 * email_subscribe is unsubscribed without such a state, at the profile's last update (the service
 * keeps no other time for a state set through /users/track).
 */
export async function queryUnsubscribes(db: Queryable, workspaceId: string, q: EmailListQuery): Promise<{ email: string; unsubscribed_at: Date }[]> {
  const r = await query<{ email: string; unsubscribed_at: Date }>(
    db,
    'queryUnsubscribes',
    `WITH unsubscribed AS (
       SELECT email, updated_at AS at FROM email_states
        WHERE workspace_id = $1 AND state = 'unsubscribed' AND ($2::text[] IS NULL OR email = ANY($2::text[]))
       UNION ALL
       (SELECT DISTINCT ON (p.email) p.email, p.updated_at FROM profiles p
         WHERE p.workspace_id = $1 AND p.email_subscribe = 'unsubscribed' AND p.email IS NOT NULL AND ($2::text[] IS NULL OR p.email = ANY($2::text[]))
           AND NOT EXISTS (SELECT 1 FROM email_states e WHERE e.workspace_id = $1 AND e.email = p.email)
         ORDER BY p.email, p.updated_at DESC)
     )
     SELECT email, at AS unsubscribed_at FROM unsubscribed
      WHERE $2::text[] IS NOT NULL OR (at >= $3::timestamptz AND at < $4::timestamptz)
      ORDER BY at ${q.descending ? 'DESC' : 'ASC'}, email LIMIT $5 OFFSET $6`,
    [workspaceId, q.emails ?? null, q.range?.from ?? null, q.range?.to ?? null, q.limit, q.offset],
  )
  return r.rows
}
