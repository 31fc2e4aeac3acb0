import { BlockList, isIP } from 'node:net'

/**
 * Addresses a callback must not reach unless CALLBACK_ALLOW_PRIVATE is set: loopback, private,
 * link-local and unique-local ranges, plus the unspecified addresses, which also reach this host.
 */
const blocked = new BlockList()
for (const [net, prefix] of [['0.0.0.0', 8], ['127.0.0.0', 8], ['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['169.254.0.0', 16]] as const) {
  blocked.addSubnet(net, prefix, 'ipv4')
}
blocked.addAddress('::', 'ipv6')
blocked.addAddress('::1', 'ipv6')
blocked.addSubnet('fc00::', 7, 'ipv6')
blocked.addSubnet('fe80::', 10, 'ipv6')

const MAPPED_IPV4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i

export function isPrivateAddress(address: string): boolean {
  // An IPv4-mapped IPv6 address reaches the IPv4 host it embeds.
  const mapped = MAPPED_IPV4.exec(address)
  if (mapped) return blocked.check(mapped[1], 'ipv4')
  const family = isIP(address)
  if (family === 0) return true
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6')
}
