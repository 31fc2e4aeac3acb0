import yauzl from 'yauzl'

/** Every entry of a ZIP as text, by name. */
export async function unzip(buffer: Buffer): Promise<Map<string, string>> {
  const zip = await yauzl.fromBufferPromise(buffer, { lazyEntries: true })
  const out = new Map<string, string>()
  for await (const entry of zip.eachEntry()) {
    const chunks: Buffer[] = []
    for await (const c of await zip.openReadStreamPromise(entry)) chunks.push(c as Buffer)
    out.set(entry.fileName, Buffer.concat(chunks).toString('utf8'))
  }
  return out
}
