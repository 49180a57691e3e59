/**
 * What kind of address an IP literal is, for the webhook URL policy (UrlPolicy.ts): every range that
 * is not globally reachable, as data, matched with ipaddr.js (parsing, CIDR matching). Only "public"
 * may be connected to under the policy, and "metadata" never, whatever the settings.
 */
import ipaddr from "ipaddr.js"
import { LRUCache } from "lru-cache"

export type AddressClass =
  | "public"
  | "metadata"
  | "unspecified"
  | "loopback"
  | "private"
  | "shared"
  | "link-local"
  | "protocol-assignment"
  | "documentation"
  | "benchmarking"
  | "reserved"
  | "broadcast"
  | "multicast"
  | "translation"
  | "tunnel"
  | "discard"
  | "identifier"
  | "unique-local"
  | "site-local"
  | "invalid"

/**
 * Cloud instance metadata and credential services. A request to one can hand out the host's cloud
 * credentials, so webhooks may never reach them, not even with HUB_WEBHOOK_ALLOW_PRIVATE=true or in
 * sandbox mode. Some are public addresses (Azure's), so the ranges below would not catch them.
 */
const METADATA: ReadonlyArray<string> = [
  "169.254.169.254", // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner, … instance metadata
  "169.254.170.2", // AWS ECS task metadata and credentials
  "169.254.170.23", // AWS EKS Pod Identity agent
  "169.254.0.23", // Tencent Cloud metadata
  "100.100.100.200", // Alibaba Cloud metadata
  "192.0.0.192", // Oracle Cloud Infrastructure (classic) metadata
  "168.63.129.16", // Azure WireServer (host agent), a public address reachable only inside Azure
  "fd00:ec2::254", // AWS instance metadata over IPv6
  "fd00:ec2::23", // AWS EKS Pod Identity agent over IPv6
  "fd20:ce::254" // GCP metadata over IPv6
]

/**
 * IPv4 ranges that are not globally reachable: the IANA "IPv4 Special-Purpose Address Registry"
 * (RFC 6890 and its updates) plus multicast (IANA "IPv4 Multicast Address Space Registry"). The
 * first match names the class. 192.0.0.0/24 is refused whole, its two globally reachable anycast
 * entries (PCP 192.0.0.9, TURN 192.0.0.10) with it: no webhook receiver lives there. The registry's
 * globally reachable blocks (AS112 192.31.196.0/24 and 192.175.48.0/24, AMT 192.52.193.0/24) are public.
 */
const SPECIAL_V4: ReadonlyArray<readonly [cidr: string, kind: AddressClass]> = [
  ["0.0.0.0/8", "unspecified"], // "this network" (RFC 791), 0.0.0.0/32 "this host"
  ["10.0.0.0/8", "private"], // RFC 1918
  ["100.64.0.0/10", "shared"], // carrier-grade NAT (RFC 6598)
  ["127.0.0.0/8", "loopback"], // RFC 1122
  ["169.254.0.0/16", "link-local"], // RFC 3927
  ["172.16.0.0/12", "private"], // RFC 1918
  ["192.0.0.0/24", "protocol-assignment"], // IETF protocol assignments (RFC 6890): DS-Lite, NAT64 discovery, dummy
  ["192.0.2.0/24", "documentation"], // TEST-NET-1 (RFC 5737)
  ["192.88.99.0/24", "reserved"], // former 6to4 relay anycast (RFC 7526)
  ["192.168.0.0/16", "private"], // RFC 1918
  ["198.18.0.0/15", "benchmarking"], // RFC 2544
  ["198.51.100.0/24", "documentation"], // TEST-NET-2 (RFC 5737)
  ["203.0.113.0/24", "documentation"], // TEST-NET-3 (RFC 5737)
  ["224.0.0.0/4", "multicast"], // RFC 5771
  ["255.255.255.255/32", "broadcast"], // limited broadcast (RFC 919), inside the next
  ["240.0.0.0/4", "reserved"] // future use (RFC 1112)
]

/** Where an IPv6 prefix carries an IPv4 address: that address, from this 16-bit group on, is what is reached. */
type EmbeddedAt = { readonly embeddedAt: 1 | 6 }

/**
 * IPv6: the IANA "IPv6 Special-Purpose Address Registry" (RFC 6890 and its updates), multicast,
 * and the IANA "IPv6 Address Space" registry: only 2000::/3 is global unicast; everything outside it
 * and outside these rows is reserved by the IETF and refused too. The translation and tunnelling
 * prefixes that carry an IPv4 address at a known place are classified by that address (a NAT64
 * gateway or a 6to4 relay would connect to it). The local-use NAT64 prefix and Teredo stay refused
 * as such (and their embedded addresses are checked for metadata, see `embeddedV4`). The first match
 * wins: `::` and `::1` come before the IPv4-compatible block that contains them. 2001::/23 (IETF
 * protocol assignments) is refused whole after its named parts, its anycast and AS112/AMT entries with it.
 */
const SPECIAL_V6: ReadonlyArray<readonly [cidr: string, rule: AddressClass | EmbeddedAt]> = [
  ["::/128", "unspecified"], // RFC 4291
  ["::1/128", "loopback"], // RFC 4291
  ["::ffff:0:0/96", { embeddedAt: 6 }], // IPv4-mapped (RFC 4291)
  ["::ffff:0:0:0/96", { embeddedAt: 6 }], // IPv4-translated (SIIT, RFC 2765)
  ["::/96", { embeddedAt: 6 }], // IPv4-compatible (deprecated, RFC 4291)
  ["64:ff9b::/96", { embeddedAt: 6 }], // NAT64 well-known prefix (RFC 6052)
  ["64:ff9b:1::/48", "translation"], // local-use IPv4/IPv6 translation (RFC 8215), not globally reachable
  ["2002::/16", { embeddedAt: 1 }], // 6to4 (RFC 3056)
  ["100::/64", "discard"], // discard-only (RFC 6666)
  ["100:0:0:1::/64", "discard"], // dummy IPv6 prefix (RFC 9780)
  ["2001::/32", "tunnel"], // Teredo (RFC 4380)
  ["2001:2::/48", "benchmarking"], // RFC 5180
  ["2001:10::/28", "identifier"], // ORCHID (deprecated, RFC 4843): identifiers, not locators
  ["2001:20::/28", "identifier"], // ORCHIDv2 (RFC 7343)
  ["2001:30::/28", "identifier"], // drone remote ID entity tags (RFC 9374)
  ["2001::/23", "protocol-assignment"], // IETF protocol assignments (RFC 2928)
  ["2001:db8::/32", "documentation"], // RFC 3849
  ["3fff::/20", "documentation"], // RFC 9637
  ["5f00::/16", "reserved"], // SRv6 SIDs (RFC 9602)
  ["fc00::/7", "unique-local"], // RFC 4193
  ["fe80::/10", "link-local"], // RFC 4291
  ["fec0::/10", "site-local"], // deprecated (RFC 3879)
  ["ff00::/8", "multicast"] // RFC 4291
]

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR("2000::/3")

const rangesV4 = SPECIAL_V4.map(([cidr, kind]) => ({ range: ipaddr.IPv4.parseCIDR(cidr), kind }))
const rangesV6 = SPECIAL_V6.map(([cidr, rule]) => ({ range: ipaddr.IPv6.parseCIDR(cidr), rule }))
const metadataV4 = METADATA.filter((a) => ipaddr.IPv4.isValidFourPartDecimal(a)).map((a) => ipaddr.IPv4.parse(a))
const metadataV6 = METADATA.filter((a) => ipaddr.IPv6.isValid(a)).map((a) => ipaddr.IPv6.parse(a))

const classifyV4 = (address: ipaddr.IPv4): AddressClass => {
  if (metadataV4.some((m) => address.match(m, 32))) return "metadata"
  return rangesV4.find(({ range }) => address.match(range))?.kind ?? "public"
}

const v4At = (bytes: ReadonlyArray<number>, at: ReadonlyArray<number>) => new ipaddr.IPv4(at.map((i) => bytes[i] ?? 0))

const LOCAL_NAT64 = ipaddr.IPv6.parseCIDR("64:ff9b:1::/48")
const TEREDO = ipaddr.IPv6.parseCIDR("2001::/32")
const ISATAP_MARK = 0x5efe

/**
 * Every IPv4 address an IPv6 address may carry where its own range does not say exactly where: the
 * local-use NAT64 prefix at each RFC 6052 place a /48, /56, /64 or /96 translator would take it from
 * (bits 64-71 are skipped), Teredo's server and its (inverted) client, and an ISATAP interface
 * identifier (RFC 5214, any prefix). None may be cloud metadata, whatever the settings: a translator,
 * relay or tunnel would carry the request there.
 */
const embeddedV4 = (address: ipaddr.IPv6): ReadonlyArray<ipaddr.IPv4> => {
  const bytes = address.toByteArray()
  const found: Array<ipaddr.IPv4> = []
  if (address.match(LOCAL_NAT64)) {
    found.push(
      v4At(bytes, [6, 7, 9, 10]),
      v4At(bytes, [7, 9, 10, 11]),
      v4At(bytes, [9, 10, 11, 12]),
      v4At(bytes, [12, 13, 14, 15])
    )
  }
  if (address.match(TEREDO)) {
    found.push(v4At(bytes, [4, 5, 6, 7]), new ipaddr.IPv4(bytes.slice(12, 16).map((b) => b ^ 255)))
  }
  // 0000:5efe or 0200:5efe, with either value of the group bit.
  if (((address.parts[4] ?? 0) & 0xfcff) === 0 && address.parts[5] === ISATAP_MARK) {
    found.push(v4At(bytes, [12, 13, 14, 15]))
  }
  return found
}

const classifyV6 = (address: ipaddr.IPv6): AddressClass => {
  if (metadataV6.some((m) => address.match(m, 128))) return "metadata"
  if (embeddedV4(address).some((v4) => classifyV4(v4) === "metadata")) return "metadata"
  const special = rangesV6.find(({ range }) => address.match(range))
  if (special !== undefined) {
    if (typeof special.rule === "string") return special.rule
    const [high = 0, low = 0] = address.parts.slice(special.rule.embeddedAt, special.rule.embeddedAt + 2)
    return classifyV4(new ipaddr.IPv4([high >> 8, high & 255, low >> 8, low & 255]))
  }
  return address.match(GLOBAL_UNICAST_V6) ? "public" : "reserved"
}

const classify = (address: string): AddressClass => {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  // Dotted quads only: "1.2.3", "0x7f.1" and "01.2.3.4" are not addresses a resolver answers.
  if (ipaddr.IPv4.isValidFourPartDecimal(bare)) return classifyV4(ipaddr.IPv4.parse(bare))
  if (ipaddr.IPv6.isValid(bare)) return classifyV6(ipaddr.IPv6.parse(bare))
  return "invalid"
}

/** Every delivery checks its addresses; a receiver's few addresses are classified once. */
const known = new LRUCache<string, AddressClass>({ max: 10_000 })

/** What kind of address an IP literal is (an IPv6 one may be bracketed or carry a zone). */
export const classifyAddress = (address: string): AddressClass => {
  const cached = known.get(address)
  if (cached !== undefined) return cached
  const kind = classify(address)
  known.set(address, kind)
  return kind
}

/** How a refusal names a class: "cloud metadata", "unique-local", … */
export const describeClass = (kind: AddressClass): string => (kind === "metadata" ? "cloud metadata" : kind)
