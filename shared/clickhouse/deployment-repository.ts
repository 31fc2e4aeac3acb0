import type { ClickHouse } from './client.js'

/** The deployment ids this ClickHouse database records (none on a new one; more than one only if two deployments raced to an empty one). */
export async function recordedDeployments(ch: ClickHouse): Promise<string[]> {
  const rs = await ch.client.query({ query: `SELECT DISTINCT id FROM ${ch.database}.deployment`, format: 'JSONEachRow' })
  return (await rs.json<{ id: string }>()).map((r) => r.id)
}

export async function recordDeployment(ch: ClickHouse, id: string): Promise<void> {
  await ch.client.insert({ table: `${ch.database}.deployment`, columns: ['id'], values: [{ id }], format: 'JSONEachRow' })
}
