import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Download links of exports without storage credentials. The key is derived from the admin token,
 * which every API process of a deployment shares, so any of them can check a link another issued.
 * The link carries no expiry: it is valid for the TTL after the export finishes, read from the row.
 */
export function downloadKey(adminToken: string): Buffer {
  return createHmac('sha256', adminToken).update('export-download-link/v1').digest()
}

function signature(key: Buffer, exportId: string): string {
  return createHmac('sha256', key).update(exportId).digest('base64url')
}

export function downloadUrl(publicUrl: string, key: Buffer, exportId: string): string {
  return `${publicUrl}/exports/${exportId}/download?signature=${signature(key, exportId)}`
}

export function signatureValid(key: Buffer, exportId: string, given: string): boolean {
  const expected = Buffer.from(signature(key, exportId))
  const actual = Buffer.from(given)
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}
