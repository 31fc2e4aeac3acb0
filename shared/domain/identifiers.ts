import { hash } from 'node:crypto'
import { z } from 'zod'

/** The ways a request names one user, one schema per kind, for contracts that take only some kinds. */
export const IdentifierByKind = {
  external_id: z.object({ kind: z.literal('external_id'), value: z.string() }),
  user_alias: z.object({ kind: z.literal('user_alias'), alias_name: z.string(), alias_label: z.string() }),
  service_id: z.object({ kind: z.literal('service_id'), value: z.string() }),
  email: z.object({ kind: z.literal('email'), value: z.string() }),
  phone: z.object({ kind: z.literal('phone'), value: z.string() }),
}

const { external_id, user_alias, service_id, email, phone } = IdentifierByKind
/** How a request names one user. */
export const Identifier = z.discriminatedUnion('kind', [external_id, user_alias, service_id, email, phone])
export type Identifier = z.infer<typeof Identifier>
export type IdentifierKind = Identifier['kind']

export function identifierKey(id: Identifier): string {
  return id.kind === 'user_alias' ? `user_alias:${id.alias_label}\u0000${id.alias_name}` : `${id.kind}:${id.value}`
}

/** The track partition of a user: every request naming the user the same way lands in the same one. */
export function partitionOf(id: Identifier, partitions: number): number {
  return partitionOfKey(identifierKey(id), partitions)
}

export function partitionOfKey(key: string, partitions: number): number {
  // The digest's first 32 bits, big-endian, as before; read from the hex digest, which costs half
  // of allocating a Buffer for it (a request hashes ~300 keys).
  return parseInt(hash('sha1', key, 'hex').slice(0, 8), 16) % partitions
}

export function describeIdentifier(id: Identifier): string {
  return id.kind === 'user_alias' ? `user_alias ${id.alias_label}/${id.alias_name}` : `${id.kind} ${id.value}`
}
