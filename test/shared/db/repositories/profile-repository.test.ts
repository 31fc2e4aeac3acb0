import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type pg from 'pg'
import { lockProfilesToChange, lockWorkspaceIdentities, readProfileKeys, updateProfiles, type ProfileRow } from '../../../../shared/db/repositories/profile-repository.js'
import { startTestEnv, type TestEnv } from '../../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

async function newProfile(ws: string, externalId: string): Promise<number> {
  const r = await env.ctx.pg.query<{ id: number }>(
    'INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket) VALUES ($1, $2, $3, 1) RETURNING id',
    [ws, randomUUID(), externalId],
  )
  return r.rows[0].id
}

/** A connection in an open transaction that gives up on a lock after half a second instead of waiting on. */
async function transaction(): Promise<pg.PoolClient> {
  const db = await env.ctx.pg.connect()
  await db.query('BEGIN')
  await db.query("SET LOCAL lock_timeout = '500ms'")
  return db
}

async function rollback(...dbs: pg.PoolClient[]): Promise<void> {
  for (const db of dbs) {
    await db.query('ROLLBACK')
    db.release()
  }
}

describe('the locks of a track batch', () => {
  it('lets a batch change a profile another batch only records events for, and that one read its keys meanwhile', async () => {
    const ws = randomUUID()
    const externalId = `u-${randomUUID()}`
    const id = await newProfile(ws, externalId)
    // One partition's batch names the user for its events only: it holds the workspace's identities, not the row.
    const events = await transaction()
    await lockWorkspaceIdentities(events, [ws], 'shared')
    expect((await readProfileKeys(events, ws, { externalIds: [externalId] })).keys.map((k) => k.id)).toEqual([id])
    // Another partition's batch changes the same user's fields meanwhile, without waiting.
    const attributes = await transaction()
    await lockWorkspaceIdentities(attributes, [ws], 'shared')
    const named = await readProfileKeys(attributes, ws, { externalIds: [externalId] })
    const [keys] = await lockProfilesToChange(attributes, named.keys.map((k) => k.id))
    await updateProfiles(attributes, [{ id, first_name: 'Ada' } as ProfileRow], ['first_name'])
    await attributes.query('COMMIT')
    attributes.release()
    // The events batch sees the committed change on its next read.
    const again = await readProfileKeys(events, ws, { externalIds: [externalId] })
    await rollback(events)
    expect(keys).toMatchObject({ id, version: 1 })
    expect(again.keys).toMatchObject([{ id, version: 2 }])
    const stored = await env.ctx.pg.query('SELECT first_name, version FROM profiles WHERE id = $1', [id])
    expect(stored.rows).toEqual([{ first_name: 'Ada', version: 2 }])
  })

  it('holds a merge or delete off while a batch of its workspace runs, and a batch off while one runs', async () => {
    const [ws, other] = [randomUUID(), randomUUID()]
    const batch = await transaction()
    await lockWorkspaceIdentities(batch, [ws], 'shared')
    const identity = await transaction()
    await expect(lockWorkspaceIdentities(identity, [ws], 'exclusive')).rejects.toMatchObject({ code: '55P03' })
    await rollback(batch, identity)

    const merging = await transaction()
    await lockWorkspaceIdentities(merging, [ws], 'exclusive')
    const later = await transaction()
    await expect(lockWorkspaceIdentities(later, [ws], 'shared')).rejects.toMatchObject({ code: '55P03' })
    // Another workspace's batches go on meanwhile.
    const elsewhere = await transaction()
    await lockWorkspaceIdentities(elsewhere, [other, other], 'shared')
    await rollback(merging, later, elsewhere)
  })

  it('makes two batches changing one profile wait for each other', async () => {
    const ws = randomUUID()
    const externalId = `u-${randomUUID()}`
    const id = await newProfile(ws, externalId)
    const first = await transaction()
    await lockProfilesToChange(first, (await readProfileKeys(first, ws, { externalIds: [externalId] })).keys.map((k) => k.id))
    const second = await transaction()
    await readProfileKeys(second, ws, { externalIds: [externalId] })
    await expect(lockProfilesToChange(second, [id])).rejects.toMatchObject({ code: '55P03' })
    await rollback(first, second)
  })
})
