import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { withTransaction } from '../../../../shared/db/pool.js'
import { readProfileKeys, lockProfilesToChange } from '../../../../shared/db/repositories/profile-repository.js'
import { loadRecordParts } from '../../../../shared/db/repositories/user-record-repository.js'
import { startTestEnv, type TestEnv } from '../../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

/** Waits until a statement named `name` waits for a lock. */
async function waitingForLock(name: string): Promise<void> {
  for (;;) {
    const r = await env.ctx.pg.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, [`/* ${name} */%`])
    if (r.rows[0].n > 0) return
    await sleep(10)
  }
}

describe('the locking read of a track batch', () => {
  it('reads a profile’s fields and parts as a transaction it waited for left them', async () => {
    const ws = randomUUID()
    const externalId = `u-${randomUUID()}`
    const created = await env.ctx.pg.query<{ id: number }>(
      'INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket) VALUES ($1, $2, $3, 1) RETURNING id',
      [ws, randomUUID(), externalId],
    )
    const id = created.rows[0].id
    // Another batch holds the profile to change it, gives it an alias and a new version, and commits while we wait.
    const holder = await env.ctx.pg.connect()
    await holder.query('BEGIN')
    await lockProfilesToChange(holder, [id])
    await holder.query(`INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, 'crm', 'a-1', $2)`, [ws, id])
    await holder.query('UPDATE profiles SET version = version + 1 WHERE id = $1', [id])
    const locking = withTransaction(env.ctx.pg, async (db) => {
      const named = await readProfileKeys(db, ws, { externalIds: [externalId], aliases: [{ alias_label: 'crm', alias_name: 'a-1' }] })
      const rows = await lockProfilesToChange(db, named.keys.map((k) => k.id))
      return { keys: rows, aliasOwner: named.aliasOwner, records: await loadRecordParts(db, rows) }
    })
    await waitingForLock('lockProfilesToChange')
    await holder.query('COMMIT')
    holder.release()

    // The keys' read did not wait, so its alias owners predate the alias; the parts read after the lock hold it.
    const { keys, aliasOwner, records } = await locking
    expect(keys.map((k) => [k.id, k.version])).toEqual([[id, 2]])
    expect([...aliasOwner]).toEqual([])
    expect(records.map((r) => [r.profile.version, r.parts.aliases])).toEqual([[2, [{ alias_name: 'a-1', alias_label: 'crm' }]]])
  })

  it('answers every profile asked about, in order, those without parts with empty ones', async () => {
    const ws = randomUUID()
    const ids: number[] = []
    for (let i = 0; i < 3; i++) {
      const r = await env.ctx.pg.query<{ id: number }>('INSERT INTO profiles (workspace_id, service_id, random_bucket) VALUES ($1, $2, 1) RETURNING id', [ws, randomUUID()])
      ids.push(r.rows[0].id)
    }
    await env.ctx.pg.query(`INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, 'crm', 'b-1', $2)`, [ws, ids[1]])
    const rows = await withTransaction(env.ctx.pg, (db) => lockProfilesToChange(db, [ids[2], ids[1], ids[0]]))
    const records = await loadRecordParts(env.ctx.pg, rows)
    expect(records.map((r) => [r.profile.id, r.parts])).toEqual([
      [ids[0], { aliases: [], tokens: [], subscriptions: [] }],
      [ids[1], { aliases: [{ alias_name: 'b-1', alias_label: 'crm' }], tokens: [], subscriptions: [] }],
      [ids[2], { aliases: [], tokens: [], subscriptions: [] }],
    ])
    // Each profile has parts of its own to add to.
    expect(records[0].parts.aliases).not.toBe(records[2].parts.aliases)
  })
})
