import { describe, expect, it } from 'vitest'
import { countryOf } from '../../../shared/domain/countries.js'

describe('countryOf', () => {
  it('takes an ISO 3166-1 alpha-2 code in either case, and maps an alpha-3 code to it', () => {
    expect(['de', 'DE', 'xk', 'deu', 'USA', 'gbr'].map(countryOf)).toEqual([{ code: 'DE' }, { code: 'DE' }, { code: 'XK' }, { code: 'DE' }, { code: 'US' }, { code: 'GB' }])
  })

  it('maps English names and aliases, without case, diacritics, repeated spaces, curly apostrophes or a leading "the"', () => {
    const names = ['United States', 'united states of america', 'U.S.A.', 'UK', 'Great Britain', '  united   kingdom ', 'Ivory Coast', 'Cote d\u2019Ivoire', "Côte d'Ivoire", 'the Netherlands', 'Türkiye', 'Turkey', 'Czechia']
    expect(names.map((n) => countryOf(n))).toEqual(['US', 'US', 'US', 'GB', 'GB', 'GB', 'CI', 'CI', 'CI', 'NL', 'TR', 'TR', 'CZ'].map((code) => ({ code })))
  })

  it('answers the codes of a name several countries share, and nothing for one no country has', () => {
    expect(countryOf('Congo')).toEqual({ ambiguous: ['CD', 'CG'] })
    expect(countryOf('Republic of the Congo')).toEqual({ code: 'CG' })
    for (const n of ['Atlantis', 'XX', 'EU', 'ZZZ', '', 'England', 'x'.repeat(500)]) expect(countryOf(n), n).toBeUndefined()
  })
})
