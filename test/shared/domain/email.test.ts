import { describe, expect, it } from 'vitest'
import { EmailAddress, emailProblem } from '../../../shared/domain/email.js'

const longest = `${'a'.repeat(242)}@example.com`

describe('email addresses', () => {
  it('accepts up to 254 characters, surrounding spaces aside, and refuses longer ones', () => {
    expect(longest).toHaveLength(254)
    expect(emailProblem(longest)).toBeUndefined()
    expect(emailProblem(`  ${longest}  `)).toBeUndefined()
    expect(emailProblem(`a${longest}`)).toBe('must be at most 254 characters')
  })

  it('refuses what is not an address', () => {
    for (const bad of ['broken', 'a@b', 'a b@example.com', '@example.com', 'a@@example.com', '', 42, null]) {
      expect(emailProblem(bad), String(bad)).toBe('must be a valid email address')
    }
  })

  it('answers the address trimmed and lower-cased, and the problem as the issue message', () => {
    expect(EmailAddress.parse(' Ada@Example.COM ')).toBe('ada@example.com')
    expect(EmailAddress.safeParse('broken').error?.issues.map((i) => i.message)).toEqual(['must be a valid email address'])
    expect(EmailAddress.safeParse(`a${longest}`).error?.issues.map((i) => i.message)).toEqual(['must be at most 254 characters'])
  })
})
