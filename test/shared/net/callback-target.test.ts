import type { LookupAddress } from 'node:dns'
import { describe, expect, it } from 'vitest'
import {
  addressRefusal,
  CallbackTargetRefused,
  callbackUrlRefusal,
  checkedLookup,
  classifyAddress,
  type ResolveHost,
} from '../../../shared/net/callback-target.js'

// Nothing here opens a socket: addresses are classified as text, and names are answered by a
// resolver the test hands in (the system resolver only ever sees `localhost`, from /etc/hosts).

/** Addresses of each kind a callback target may name and of IANA's special-purpose registries, with the class each must get. */
const table: [string, 'global' | 'private' | 'never', string][] = [
  // Public unicast.
  ['8.8.8.8', 'global', 'unicast'],
  ['1.1.1.1', 'global', 'unicast'],
  ['172.32.0.1', 'global', 'unicast'],
  ['172.15.255.255', 'global', 'unicast'],
  ['192.169.0.1', 'global', 'unicast'],
  ['100.63.255.255', 'global', 'unicast'],
  ['100.128.0.0', 'global', 'unicast'],
  ['2001:4860:4860::8888', 'global', 'unicast'],
  ['2606:4700::1111', 'global', 'unicast'],
  ['::ffff:8.8.8.8', 'global', 'unicast'],
  // What CALLBACK_ALLOW_PRIVATE opens.
  ['127.0.0.1', 'private', 'loopback'],
  ['127.9.9.9', 'private', 'loopback'],
  ['::1', 'private', 'loopback'],
  ['10.1.2.3', 'private', 'private'],
  ['172.16.0.1', 'private', 'private'],
  ['172.31.255.255', 'private', 'private'],
  ['192.168.1.1', 'private', 'private'],
  ['169.254.169.254', 'private', 'linkLocal'],
  ['fe80::1', 'private', 'linkLocal'],
  ['fc00::1', 'private', 'uniqueLocal'],
  ['fd12::1', 'private', 'uniqueLocal'],
  ['100.64.0.1', 'private', 'carrierGradeNat'],
  ['100.100.100.200', 'private', 'carrierGradeNat'],
  ['::ffff:127.0.0.1', 'private', 'loopback'],
  ['::ffff:10.0.0.1', 'private', 'private'],
  ['::ffff:100.64.0.1', 'private', 'carrierGradeNat'],
  // Never a callback target, whatever the setting.
  ['0.0.0.0', 'never', 'unspecified'],
  ['0.1.2.3', 'never', 'unspecified'],
  ['::', 'never', 'unspecified'],
  ['224.0.0.1', 'never', 'multicast'],
  ['239.255.255.250', 'never', 'multicast'],
  ['ff02::1', 'never', 'multicast'],
  ['255.255.255.255', 'never', 'broadcast'],
  ['198.18.0.1', 'never', 'reserved'],
  ['198.19.255.255', 'never', 'reserved'],
  ['192.0.0.1', 'never', 'reserved'],
  ['240.0.0.1', 'never', 'reserved'],
  ['192.0.2.1', 'never', 'reserved'],
  ['198.51.100.7', 'never', 'reserved'],
  ['203.0.113.9', 'never', 'reserved'],
  ['2001:db8::1', 'never', 'reserved'],
  ['64:ff9b::7f00:1', 'never', 'rfc6052'],
  ['64:ff9b::808:808', 'never', 'rfc6052'],
  ['2002:7f00:1::1', 'never', '6to4'],
  ['2001::1', 'never', 'teredo'],
  ['::ffff:0:7f00:1', 'never', 'rfc6145'],
  ['::7f00:1', 'never', 'unallocated'],
  ['1::', 'never', 'unallocated'],
  ['8000::1', 'never', 'unallocated'],
  ['::ffff:224.0.0.1', 'never', 'multicast'],
  ['localhost', 'never', 'not an IP address'],
  ['127.1', 'never', 'not an IP address'],
  ['', 'never', 'not an IP address'],
]

describe('callback address classes', () => {
  it.each(table)('%s is %s (%s)', (address, expected, range) => {
    expect(classifyAddress(address)).toEqual({ class: expected, range })
  })

  it('refuses private addresses unless allowed, and the never class always, saying why', () => {
    expect(addressRefusal('8.8.8.8', false)).toBeUndefined()
    expect(addressRefusal('100.64.0.1', false)).toBe(
      '100.64.0.1 is in the shared address space of RFC 6598; callbacks go to public addresses only unless CALLBACK_ALLOW_PRIVATE is true',
    )
    expect(addressRefusal('100.64.0.1', true)).toBeUndefined()
    expect(addressRefusal('224.0.0.1', true)).toBe('224.0.0.1 is a multicast address; no callback can be delivered there')
    expect(addressRefusal('255.255.255.255', true)).toBe('255.255.255.255 is the broadcast address; no callback can be delivered there')
    expect(addressRefusal('64:ff9b::7f00:1', true)).toMatch(/is a NAT64 address \(RFC 6052\)/)
  })
})

/** A resolver answering chosen addresses per name, and counting its calls; any other name is unknown. */
function resolverOf(answers: Record<string, string[] | (() => string[])>) {
  const calls: string[] = []
  const resolve: ResolveHost = async (host) => {
    calls.push(host)
    const a = answers[host]
    if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
    return (typeof a === 'function' ? a() : a).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  }
  return { resolve, calls }
}

describe('callback URLs at request time', () => {
  it('classifies IP literals without resolving anything', async () => {
    const { resolve, calls } = resolverOf({})
    const refusal = (url: string, allowPrivate = false) => callbackUrlRefusal(url, { allowPrivate, resolve })
    expect(await refusal('http://100.64.0.1/')).toMatch(/^100\.64\.0\.1 is in the shared address space of RFC 6598/)
    // The URL parser writes an IPv4-mapped address in hex; it is classified by the IPv4 address it embeds.
    expect(await refusal('http://[::ffff:127.0.0.1]:8080/x')).toMatch(/^::ffff:7f00:1 is a loopback address/)
    expect(await refusal('https://[64:ff9b::a00:1]/')).toMatch(/NAT64/)
    // The URL parser reads other spellings of an IPv4 address as the address.
    expect(await refusal('http://0x7f.1/')).toMatch(/^127\.0\.0\.1 is a loopback address/)
    expect(await refusal('http://224.0.0.1/', true)).toMatch(/multicast/)
    expect(await refusal('http://8.8.8.8/hook')).toBeUndefined()
    expect(await refusal('http://127.0.0.1:9/x', true)).toBeUndefined()
    expect(calls).toEqual([])
  })

  it('resolves a name and refuses it when any address is not public, or when it does not resolve', async () => {
    const { resolve, calls } = resolverOf({
      'hook.example': ['93.184.215.14'],
      'mixed.example': ['93.184.215.14', '100.100.100.200'],
      'v6.example': ['2002::1'],
    })
    const refusal = (url: string) => callbackUrlRefusal(url, { allowPrivate: false, resolve })
    expect(await refusal('https://hook.example/cb')).toBeUndefined()
    expect(await refusal('https://mixed.example/cb')).toBe(
      'mixed.example resolves to 100.100.100.200, in the shared address space of RFC 6598; callbacks go to public addresses only unless CALLBACK_ALLOW_PRIVATE is true',
    )
    expect(await refusal('https://v6.example/cb')).toMatch(/^v6\.example resolves to 2002::1, a 6to4 address/)
    expect(await refusal('https://nowhere.example/cb')).toBe('host nowhere.example does not resolve')
    expect(calls).toEqual(['hook.example', 'mixed.example', 'v6.example', 'nowhere.example'])
  })

  it('throws a passing resolver failure for the caller to answer 503', async () => {
    const resolve: ResolveHost = async () => {
      throw Object.assign(new Error('getaddrinfo EAI_AGAIN hook.example'), { code: 'EAI_AGAIN' })
    }
    await expect(callbackUrlRefusal('https://hook.example/', { allowPrivate: false, resolve })).rejects.toMatchObject({ code: 'EAI_AGAIN' })
  })

  it('resolves names with the system resolver by default (localhost, from /etc/hosts), and not at all while private addresses are allowed', async () => {
    expect(await callbackUrlRefusal('http://localhost:9/x', { allowPrivate: false })).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
    const { resolve, calls } = resolverOf({})
    expect(await callbackUrlRefusal('http://unknown.example/x', { allowPrivate: true, resolve })).toBeUndefined()
    expect(calls).toEqual([])
  })
})

/** Calls a lookup function as a socket would; answers what its callback got. */
function lookupOnce(lookup: ReturnType<typeof checkedLookup>, host: string, all: boolean) {
  return new Promise<{ err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) =>
    lookup(host, { all }, (err, address, family) => resolve({ err, address, family })),
  )
}

describe("a callback socket's lookup", () => {
  it('answers only checked addresses, and refuses a name whose next answer is private (rebinding)', async () => {
    let answer = ['93.184.215.14']
    const { resolve, calls } = resolverOf({ 'rebind.example': () => answer })
    const lookup = checkedLookup({ allowPrivate: false, resolve })
    expect(await lookupOnce(lookup, 'rebind.example', false)).toEqual({ err: null, address: '93.184.215.14', family: 4 })
    expect(await lookupOnce(lookup, 'rebind.example', true)).toEqual({ err: null, address: [{ address: '93.184.215.14', family: 4 }], family: undefined })
    answer = ['100.64.0.1']
    const refused = await lookupOnce(lookup, 'rebind.example', true)
    expect(refused.err).toBeInstanceOf(CallbackTargetRefused)
    expect(refused.err!.message).toMatch(/^rebind\.example resolves to 100\.64\.0\.1, in the shared address space/)
    // The socket is handed no address at all.
    expect(refused.address).toBe('')
    answer = ['224.0.0.1']
    expect((await lookupOnce(checkedLookup({ allowPrivate: true, resolve }), 'rebind.example', false)).err?.message).toMatch(/multicast address; no callback can be delivered there/)
    expect(calls).toHaveLength(4)
  })

  it('refuses a name that does not resolve for good, and passes other resolver failures on as they are', async () => {
    const lookup = checkedLookup({ allowPrivate: false, resolve: resolverOf({}).resolve })
    const missing = await lookupOnce(lookup, 'nowhere.example', false)
    expect(missing.err).toBeInstanceOf(CallbackTargetRefused)
    expect(missing.err!.message).toBe('host nowhere.example does not resolve')
    const passing = checkedLookup({
      allowPrivate: false,
      resolve: async () => {
        throw Object.assign(new Error('getaddrinfo EAI_AGAIN x'), { code: 'EAI_AGAIN' })
      },
    })
    const failed = await lookupOnce(passing, 'x', false)
    expect(failed.err).not.toBeInstanceOf(CallbackTargetRefused)
    expect(failed.err?.code).toBe('EAI_AGAIN')
  })
})
