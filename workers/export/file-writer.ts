import { createWriteStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import { ZipArchive } from 'archiver'
import type { OutputFormat } from '../../shared/storage/export-layout.js'

/**
 * Streams newline-delimited JSON lines into one compressed file: a ZIP holding one entry named
 * `entryName`, or a gzip stream. Lines are pulled as the compressor drains, so a file never sits
 * in memory. Returns the file's size in bytes.
 */
export async function writeExportFile(filePath: string, format: OutputFormat, entryName: string, lines: AsyncIterable<Buffer>): Promise<number> {
  const source = Readable.from(lines, { objectMode: false })
  const out = createWriteStream(filePath)
  if (format === 'gzip') {
    await pipeline(source, createGzip(), out)
  } else {
    const zip = new ZipArchive({ zlib: { level: 6 } })
    // archiver does not watch its sources' errors: a failed read must fail the archive, not the process.
    source.once('error', (e) => zip.destroy(e))
    zip.append(source, { name: entryName })
    await Promise.all([pipeline(zip, out), zip.finalize()])
  }
  return (await stat(filePath)).size
}
