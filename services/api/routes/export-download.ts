import { once } from 'node:events'
import { createReadStream } from 'node:fs'
import { access } from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import { ZipArchive } from 'archiver'
import type { Response } from 'express'
import { z } from 'zod'
import { getExportDownload, type ExportFile } from '../../../shared/db/repositories/export-repository.js'
import { ApiError, notFound, UnavailableError } from '../../../shared/errors.js'
import { downloadKey, signatureValid } from '../../../shared/storage/download-link.js'
import { jsonEntryName, localExportDir } from '../../../shared/storage/export-layout.js'
import type { Config } from '../../../shared/config.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

const DownloadQuery = z.object({ signature: z.string().describe('the signature the export handed out with the link') })

/** Postgres for the export row, where its files are and how long the link lives, the link's key. */
type DownloadDeps = Pick<ApiDeps, 'pg' | 'adminToken'> & { config: Pick<Config, 'DATA_DIR' | 'EXPORT_URL_TTL_SECONDS'> }

/**
 * GET /exports/{id}/download?signature=...: the download link of an export made without storage
 * credentials. The signature proves the service issued the link (403 otherwise); the link works
 * from the moment the export is done until EXPORT_URL_TTL_SECONDS later (410 after that) and
 * answers one ZIP holding every file of the export as newline-delimited JSON.
 */
const download: ApiRoute<DownloadDeps> = {
  method: 'get',
  path: '/exports/:id/download',
  summary: 'Download a finished export as one ZIP (signed link handed out by the export)',
  auth: 'none',
  query: DownloadQuery,
  responses: { 200: 'ZIP of newline-delimited JSON files', 403: 'bad or missing signature', 404: 'unknown export', 409: 'export not finished or failed', 410: 'link expired', 503: "the export's files are not in this API process's DATA_DIR (its export worker runs elsewhere)" },
  handle: async (req, res, deps) => {
    const id = req.params.id
    // A missing signature is a 403 like a wrong one: the link, not the caller, is at fault.
    const signature = DownloadQuery.safeParse(req.query).data?.signature ?? ''
    if (!signatureValid(downloadKey(deps.adminToken), id, signature)) throw new ApiError(403, 'forbidden', 'this download link is not valid (bad or missing signature)')
    const found = await getExportDownload(deps.pg, id)
    if (!found) throw notFound(`unknown export ${id}`)
    if (found.status === 'failed') throw new ApiError(409, 'export_failed', `the export failed: ${found.error ?? 'unknown reason'}`)
    if (found.status !== 'done' || !found.finished_at) {
      throw new ApiError(409, 'export_not_ready', `the export is not finished yet (status ${found.status}); the link works once it is done`)
    }
    const expiresAt = found.finished_at.getTime() + deps.config.EXPORT_URL_TTL_SECONDS * 1000
    if (Date.now() >= expiresAt) throw new ApiError(410, 'link_expired', `this download link expired at ${new Date(expiresAt).toISOString()}`)
    const dir = localExportDir(deps.config.DATA_DIR, found.object_prefix)
    // The export worker wrote the files into its DATA_DIR: an API process on another host has none of them.
    const missing = await firstMissing(dir, found.files)
    if (missing) {
      throw new UnavailableError(
        `the export's file ${missing} is not in this API process's DATA_DIR: the API and the export worker must share one DATA_DIR, or the workspace needs export storage`,
        60,
      )
    }
    await sendZip(res, dir, found.files, path.basename(found.object_prefix))
  },
}

export const exportDownloadRoutes: RouteFamily<DownloadDeps> = { routes: [download] }

async function firstMissing(dir: string, files: ExportFile[]): Promise<string | undefined> {
  for (const file of files) {
    try {
      await access(path.join(dir, file.name))
    } catch {
      return file.name
    }
  }
  return undefined
}

/**
 * Streams one ZIP of the stored (gzipped) files. Entries are opened one after another, so a
 * large export holds one file open at a time; a failure midway cuts the response short.
 */
async function sendZip(res: Response, dir: string, files: ExportFile[], name: string): Promise<void> {
  res.status(200)
  res.setHeader('Content-Type', 'application/zip')
  res.setHeader('Content-Disposition', `attachment; filename="${name}.zip"`)
  const zip = new ZipArchive({ zlib: { level: 6 } })
  try {
    await Promise.all([pipeline(zip, res), appendAll(zip, dir, files)])
  } catch (e) {
    res.destroy(e as Error)
  }
}

async function appendAll(zip: ZipArchive, dir: string, files: ExportFile[]): Promise<void> {
  for (const file of files) {
    const gunzip = createGunzip()
    pipeline(createReadStream(path.join(dir, file.name)), gunzip).catch((e) => zip.destroy(e))
    zip.append(gunzip, { name: jsonEntryName(file.name) })
    await once(zip, 'entry')
  }
  await zip.finalize()
}
