import { lookup } from 'node:dns/promises'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'

/**
 * Where an export callback may go, decided when the export is requested (API) and again on the
 * address the worker's socket connects to (docs/security.md). An address is
 *  - `global` when ipaddr.js names its range `unicast` (an IPv4-mapped IPv6 address by the IPv4
 *    address it embeds, which is the host it reaches);
 *  - `private` in the ranges CALLBACK_ALLOW_PRIVATE opens for local development: loopback,
 *    RFC 1918, link-local, unique-local and the shared address space of RFC 6598;
 *  - `never` otherwise (multicast, broadcast, unspecified, reserved and documentation ranges,
 *    benchmarking, NAT64, 6to4, Teredo, ...): no TCP peer a callback could mean lives there.
 */
export type AddressClass = 'global' | 'private' | 'never'

export interface AddressVerdict {
  class: AddressClass
  /** ipaddr.js's name of the range (`carrierGradeNat`, `rfc6052`...), or `unallocated` / `not an IP address`. */
  range: string
}

const OPENED_BY_SWITCH = new Set(['loopback', 'private', 'linkLocal', 'uniqueLocal', 'carrierGradeNat'])

/**
 * ipaddr.js calls every IPv6 address outside its special ranges unicast, unallocated space too
 * (`1::`, the deprecated IPv4-compatible `::7f00:1`); IANA's global unicast space is 2000::/3.
 */
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3')

const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address (RFC 1918)',
  linkLocal: 'a link-local address',
  uniqueLocal: 'a unique-local address',
  carrierGradeNat: 'in the shared address space of RFC 6598',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  unspecified: 'the unspecified address',
  reserved: 'in a reserved, benchmarking or documentation range',
  benchmarking: 'in the benchmarking range',
  rfc6052: 'a NAT64 address (RFC 6052)',
  rfc6145: 'an IPv4-translated address (RFC 6145)',
  '6to4': 'a 6to4 address (RFC 3056)',
  teredo: 'a Teredo address',
  unallocated: 'outside the global unicast space 2000::/3',
  'not an IP address': 'not an IP address',
}

export function classifyAddress(address: string): AddressVerdict {
  if (isIP(address) === 0) return { class: 'never', range: 'not an IP address' }
  let ip = ipaddr.parse(address)
  if (ip instanceof ipaddr.IPv6 && ip.isIPv4MappedAddress()) ip = ip.toIPv4Address()
  let range: string = ip.range()
  if (range === 'unicast' && ip instanceof ipaddr.IPv6 && !ip.match(IPV6_GLOBAL_UNICAST)) range = 'unallocated'
  return { class: range === 'unicast' ? 'global' : OPENED_BY_SWITCH.has(range) ? 'private' : 'never', range }
}

/** What an address is and why a callback may not go there; undefined when it may. */
function refusalOf(address: string, allowPrivate: boolean): { what: string; why: string } | undefined {
  const verdict = classifyAddress(address)
  if (verdict.class === 'global' || (verdict.class === 'private' && allowPrivate)) return undefined
  return {
    what: RANGE_WORDS[verdict.range] ?? `in the special-purpose range ${verdict.range}`,
    why: verdict.class === 'private' ? 'callbacks go to public addresses only unless CALLBACK_ALLOW_PRIVATE is true' : 'no callback can be delivered there',
  }
}

/** Why a callback may not go to an IP address, or undefined when it may. */
export function addressRefusal(address: string, allowPrivate: boolean): string | undefined {
  const r = refusalOf(address, allowPrivate)
  return r && `${address} is ${r.what}; ${r.why}`
}

/** A callback target refused for good: a retry cannot change the answer. */
export class CallbackTargetRefused extends Error {}

export interface ResolvedAddress {
  address: string
  family: number
}

/** Every address a host name has. */
export type ResolveHost = (host: string) => Promise<ResolvedAddress[]>

/** The system resolver, as a socket uses it by default (getaddrinfo: /etc/hosts, then DNS). */
export const systemResolve: ResolveHost = (host) => lookup(host, { all: true })

export interface TargetRules {
  allowPrivate: boolean
  /** systemResolve unless a test answers chosen addresses. */
  resolve?: ResolveHost
}

/** The IP address a URL names literally (brackets of IPv6 removed), or undefined for a host name. */
function literalHost(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  return isIP(host) ? host : undefined
}

/**
 * Every address of a host name, each checked: one refused address refuses the name, since a client
 * may connect to any of them. A name that does not resolve is refused for good; any other failure
 * of the resolver (a timeout) is thrown as it is, for the caller to treat as passing.
 */
async function resolveChecked(host: string, rules: TargetRules): Promise<ResolvedAddress[]> {
  let addresses: ResolvedAddress[]
  try {
    addresses = await (rules.resolve ?? systemResolve)(host)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw new CallbackTargetRefused(`host ${host} does not resolve`)
    throw e
  }
  if (!addresses.length) throw new CallbackTargetRefused(`host ${host} does not resolve`)
  for (const a of addresses) {
    const r = refusalOf(a.address, rules.allowPrivate)
    if (r) throw new CallbackTargetRefused(`${host} resolves to ${a.address}, ${r.what}; ${r.why}`)
  }
  return addresses
}

/**
 * Why an export may not name this callback URL, checked when it is requested; undefined when it
 * may. An IP literal is classified as it is. A host name is resolved and every address checked,
 * but only while private addresses are refused: with CALLBACK_ALLOW_PRIVATE (local development,
 * tests) a name is checked at delivery only. A resolver failure other than "no such name" is
 * thrown (the caller answers that it is passing).
 */
export async function callbackUrlRefusal(raw: string, rules: TargetRules): Promise<string | undefined> {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'is not a URL'
  }
  const literal = literalHost(url)
  if (literal) return addressRefusal(literal, rules.allowPrivate)
  if (rules.allowPrivate) return undefined
  try {
    await resolveChecked(url.hostname, rules)
    return undefined
  } catch (e) {
    if (e instanceof CallbackTargetRefused) return e.message
    throw e
  }
}

/** Why delivery to a URL naming an IP literal is refused (a socket does no lookup for a literal); undefined for a name or an allowed address. */
export function literalTargetRefusal(url: URL, allowPrivate: boolean): string | undefined {
  const literal = literalHost(url)
  return literal && addressRefusal(literal, allowPrivate)
}

/**
 * The `lookup` of a callback's socket: it resolves the name and checks every address the socket
 * may connect to, so the address connected to is the address checked, however the name answers
 * from one lookup to the next. A refusal is a CallbackTargetRefused handed to the socket, which
 * then fails without connecting.
 */
export function checkedLookup(rules: TargetRules): LookupFunction {
  return (hostname, options, callback) => {
    resolveChecked(hostname, rules).then(
      (all) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0)
        const fitting = family ? all.filter((a) => a.family === family) : all
        if (!fitting.length) return callback(new CallbackTargetRefused(`host ${hostname} has no IPv${family} address`), '', 0)
        if (options.all) callback(null, fitting)
        else callback(null, fitting[0].address, fitting[0].family)
      },
      (e: NodeJS.ErrnoException) => callback(e, '', 0),
    )
  }
}
