import { describe, expect, it } from 'vitest'
import { TsvRows, tsvJson, tsvLine, tsvRows, tsvText } from '../../../shared/clickhouse/tsv.js'

describe('tsvLine', () => {
  it('joins fields with tabs and ends the line', () => {
    expect(tsvLine(['ws', 7, 'e:1', 1.5])).toBe('ws\t7\te:1\t1.5\n')
  })

  it('escapes the characters TabSeparated gives meaning to, and nothing else', () => {
    expect(tsvLine(['a\\b', 'tab\there', 'line\nbreak', 'cr\rhere', '{"q":"x\\"y"}', 'ünï €'])).toBe(
      'a\\\\b\ttab\\there\tline\\nbreak\tcr\\rhere\t{"q":"x\\\\"y"}\tünï €\n',
    )
  })
})

describe('tsvText and tsvJson', () => {
  it('escape a text as tsvLine escapes a field', () => {
    for (const text of ['plain', 'a\\b', 'tab\there', 'line\nbreak', 'cr\rhere', '{"q":"x\\"y"}', 'ünï €', '']) {
      expect(tsvText(text) + '\n').toBe(tsvLine([text]))
    }
  })

  it('write JSON text so that it reads back as the same JSON, whatever its strings held', () => {
    const value = { text: 'tab\there, line\nbreak, cr\r, back\\slash, quote " and ünï €', list: ['\\', '\t', '\u0001', '\ud800'], n: 1.5 }
    const json = JSON.stringify(value)
    expect(tsvJson(json)).toBe(tsvText(json))
    expect(JSON.parse(tsvRows(`${tsvJson(json)}\n`)[0][0])).toEqual(value)
    expect(tsvJson('{"plain":1}')).toBe('{"plain":1}')
  })
})

describe('tsvRows', () => {
  it('splits lines and fields, and undoes every escape the engine writes', () => {
    expect(tsvRows('a\\\\b\ttab\\there\tline\\nbreak\n\\0\\b\\f\\r\\\'q\t\n')).toEqual([
      ['a\\b', 'tab\there', 'line\nbreak'],
      ['\0\b\f\r\'q', ''],
    ])
  })

  it('reads back what tsvLine wrote, and nothing from an empty result', () => {
    const fields = ['back\\slash', 'tab\t', 'new\nline', 'cr\r', '', 'ünï €']
    expect(tsvRows(tsvLine(fields) + tsvLine(['x']))).toEqual([fields, ['x']])
    expect(tsvRows('')).toEqual([])
  })
})

describe('TsvRows', () => {
  it('holds the UTF-8 bytes of its rows as tsvLine writes them, also past its first buffer', () => {
    const rows = new TsvRows()
    expect(rows.body.length).toBe(0)
    const lines: string[] = []
    // ~200 KB, three-byte characters included: the buffer grows several times.
    for (let i = 0; i < 2_000; i++) {
      const fields = [`ws-${i}`, i, 'tab\there €€€', 'x'.repeat(i % 97), '{"a":"b\\c"}']
      rows.add(fields)
      lines.push(tsvLine(fields))
    }
    expect(rows.body.equals(Buffer.from(lines.join(''), 'utf8'))).toBe(true)
    expect(tsvRows(rows.body.toString('utf8'))[1999]).toEqual(['ws-1999', '1999', 'tab\there €€€', 'x'.repeat(1999 % 97), '{"a":"b\\c"}'])
  })

  it('appends lines written by their caller as they are', () => {
    const rows = new TsvRows()
    rows.add(['a', 1])
    rows.addLine(`${tsvText('b\tc')}\t2\n`)
    expect(tsvRows(rows.body.toString('utf8'))).toEqual([['a', '1'], ['b\tc', '2']])
  })
})
