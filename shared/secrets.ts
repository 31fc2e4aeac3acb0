import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/** A new secret with a readable prefix (`uds_key_...`), shown once and stored only as a hash. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest()
}

/** Compares two secrets in constant time (hashing first makes the lengths equal). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(hashSecret(a), hashSecret(b))
}

export function hashesEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}
