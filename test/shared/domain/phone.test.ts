import { describe, expect, it } from 'vitest'
import { toE164 } from '../../../shared/domain/phone.js'

describe('toE164', () => {
  it('answers a number seen before as it did the first time, valid or not', () => {
    for (let round = 0; round < 2; round++) {
      expect(toE164('+33 6 12 34 56 78')).toBe('+33612345678')
      expect(toE164(' 14155552671 ')).toBe('+14155552671')
      expect(toE164('+1 000')).toBeUndefined()
      expect(toE164('not a number')).toBeUndefined()
      expect(toE164(`+33 6 12 34 56 78${' '.repeat(100)}`)).toBe('+33612345678')
    }
  })

  it('stays right past the bound of numbers it remembers', () => {
    const answers = new Map<string, string | undefined>()
    for (let i = 0; i < 25_000; i++) {
      const input = `+33 6${String(i).padStart(8, '0')}`
      const e164 = toE164(input)
      expect(e164).toBe(`+336${String(i).padStart(8, '0')}`)
      if (i % 1000 === 0) answers.set(input, e164)
    }
    for (const [input, e164] of answers) expect(toE164(input)).toBe(e164)
    expect(toE164('+1 000')).toBeUndefined()
  })
})
