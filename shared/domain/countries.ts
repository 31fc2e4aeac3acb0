import countries from 'i18n-iso-countries/index.js'
import english from 'i18n-iso-countries/langs/en.json' with { type: 'json' }

/*
 * A country as senders write it, mapped to its ISO 3166-1 alpha-2 code (what profiles store,
 * interface.md 2.4) from the names and aliases i18n-iso-countries keeps in English ("United
 * States", "USA", "UK", "Ivory Coast"), or its alpha-3 code. The reference maps country names "as
 * best it can"; a name no list entry has, or one that names several countries ("Congo"), maps to
 * nothing. Only the English list: names of other languages would add ambiguities of their own.
 */
countries.registerLocale(english)

/** Lower case, no diacritics, straight apostrophes, single spaces, no leading "the": how names are compared. */
function comparable(name: string): string {
  return name
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .replace(/[\u2018\u2019]/g, "'")
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^the /, '')
}

const CODES: ReadonlySet<string> = new Set(Object.keys(countries.getAlpha2Codes()))

/** Each comparable name with the codes of every country it names (more than one: ambiguous). */
const BY_NAME = new Map<string, string[]>()
for (const [code, names] of Object.entries(countries.getNames('en', { select: 'all' }))) {
  for (const name of names) {
    const key = comparable(name)
    const codes = BY_NAME.get(key)
    if (!codes) BY_NAME.set(key, [code])
    else if (!codes.includes(code)) codes.push(code)
  }
}

/** What a sent country names: its alpha-2 code, the codes it could mean, or nothing. */
export type CountryMatch = { code: string } | { ambiguous: string[] } | undefined

export function countryOf(value: string): CountryMatch {
  // The common case first: a code, in either case.
  if (value.length === 2) {
    const code = value.toUpperCase()
    if (CODES.has(code)) return { code }
  }
  if (value.length === 3) {
    const code = countries.alpha3ToAlpha2(value.toUpperCase())
    if (code) return { code }
  }
  // Longer than any country's name: not worth normalizing.
  if (value.length > 100) return undefined
  const codes = BY_NAME.get(comparable(value))
  if (!codes) return undefined
  return codes.length === 1 ? { code: codes[0] } : { ambiguous: [...codes].sort() }
}
