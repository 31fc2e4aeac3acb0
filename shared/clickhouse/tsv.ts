/** TabSeparated text, as the engine reads and writes it: cheaper to encode and parse than JSON rows. */

const TSV_SPECIAL = /[\\\t\n\r]/
const TSV_SPECIALS = /[\\\t\n\r]/g
const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }
/** What the engine's escapes in TabSeparated output stand for; any other escaped character stands for itself. */
const TSV_UNESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', '0': '\0' }

const BACKSLASHES = /\\/g

/** A text as a TabSeparated field. */
export const tsvText = (text: string): string => (TSV_SPECIAL.test(text) ? text.replace(TSV_SPECIALS, (c) => TSV_ESCAPES[c]) : text)

/**
 * JSON text as a TabSeparated field: JSON escapes every control character, so its backslashes are
 * all there is to escape (a look for one instead of the four a text needs, over the longest fields
 * the service writes).
 */
export const tsvJson = (json: string): string => (json.includes('\\') ? json.replace(BACKSLASHES, '\\\\') : json)

/** One row as a TabSeparated line. */
export function tsvLine(fields: readonly (string | number)[]): string {
  const texts = new Array<string>(fields.length)
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]
    texts[i] = typeof f === 'number' ? String(f) : tsvText(f)
  }
  return texts.join('\t') + '\n'
}

/**
 * TabSeparated rows written straight into bytes as they are made, the form the embedded engine's
 * insert takes as it is: each line dies young instead of living in a list until its insert, and
 * no joined text is built and encoded again on the main thread.
 */
export class TsvRows {
  private bytes = Buffer.alloc(0)
  private size = 0

  /** Appends one row of fields, escaped as tsvLine escapes them. */
  add(fields: readonly (string | number)[]): void {
    this.addLine(tsvLine(fields))
  }

  /**
   * Appends one line its caller wrote, each field escaped (tsvText, tsvJson) and a newline at its
   * end: a hot writer's row built as one string, without the array of its fields.
   */
  addLine(line: string): void {
    // UTF-8 takes at most three bytes per UTF-16 code unit.
    if (this.size + 3 * line.length > this.bytes.length) {
      // Nothing until the first row: a delivery makes one per table, most of them empty (merge overrides).
      const grown = Buffer.allocUnsafe(Math.max(64 * 1024, 2 * this.bytes.length, this.size + 3 * line.length))
      this.bytes.copy(grown, 0, 0, this.size)
      this.bytes = grown
    }
    this.size += this.bytes.write(line, this.size)
  }

  /** The rows written so far. */
  get body(): Buffer {
    return this.bytes.subarray(0, this.size)
  }
}

/** The rows of a TabSeparated result, each as its fields' text. */
export function tsvRows(text: string): string[][] {
  const rows: string[][] = []
  if (text === '') return rows
  // Every line ends with a newline: the piece after the last one is no row.
  for (const line of text.slice(0, text.endsWith('\n') ? -1 : undefined).split('\n')) {
    rows.push(line.split('\t').map((f) => (f.includes('\\') ? f.replace(/\\(.)/g, (_, c: string) => TSV_UNESCAPES[c] ?? c) : f)))
  }
  return rows
}
