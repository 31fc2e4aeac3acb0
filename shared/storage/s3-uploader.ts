import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3'
import type { ExportStorage } from '../db/repositories/workspace-repository.js'
import { RetryableError } from '../errors.js'

/** The bucket said no (wrong credentials, no such bucket, access denied): retrying will not help. */
export class StorageRefusedError extends Error {}

export interface ObjectUploader {
  upload(key: string, filePath: string, contentType: string): Promise<void>
  close(): void
}

const UPLOAD_ATTEMPTS = 3
const RETRY_DELAY_MS = 500

/** Uploads export files into a workspace's bucket (AWS S3 or an S3-compatible store). */
export function s3Uploader(storage: ExportStorage): ObjectUploader {
  const client = new S3Client({
    region: storage.region,
    endpoint: storage.endpoint,
    forcePathStyle: storage.force_path_style ?? false,
    credentials: { accessKeyId: storage.access_key_id, secretAccessKey: storage.secret_access_key },
    // Plain signed PUTs: S3-compatible stores do not all accept the streamed trailing checksums.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // The SDK cannot rewind a file stream to retry it; upload() retries with a fresh stream instead.
    maxAttempts: 1,
  })
  return {
    async upload(key, filePath, contentType) {
      const { size } = await stat(filePath)
      for (let attempt = 1; ; attempt++) {
        try {
          const body = createReadStream(filePath)
          await client.send(new PutObjectCommand({ Bucket: storage.bucket, Key: key, Body: body, ContentLength: size, ContentType: contentType }))
          return
        } catch (e) {
          const failure = classifyUploadError(e, storage.bucket, key)
          if (failure instanceof StorageRefusedError || attempt >= UPLOAD_ATTEMPTS) throw failure
          await sleep(RETRY_DELAY_MS * attempt)
        }
      }
    },
    close: () => client.destroy(),
  }
}

/** A refusal by the store fails the export with its reason; a server error or a lost connection is retried. */
function classifyUploadError(e: unknown, bucket: string, key: string): Error {
  if (e instanceof S3ServiceException && e.$fault === 'client') {
    const status = e.$metadata?.httpStatusCode
    return new StorageRefusedError(`storage refused the upload of ${key} to bucket ${bucket}: ${e.name}${status ? ` (HTTP ${status})` : ''}: ${e.message}`)
  }
  return new RetryableError(`upload of ${key} to bucket ${bucket} failed: ${(e as Error).message}`, e)
}
