/**
 * SSRF protection for webhook URLs. Outside sandbox mode (and unless HUB_WEBHOOK_ALLOW_PRIVATE=true)
 * a URL whose host is or resolves to a loopback, private, link-local, shared (CGNAT), unspecified,
 * multicast, reserved or cloud-metadata address is refused when it is registered; at delivery time the
 * host is resolved again, every address is checked, and the request goes to the checked address itself
 * (the original host kept in `Host` and, for https, as the TLS server name), so a DNS answer that changes
 * between the check and the connection (rebinding) cannot redirect it.
 */
import { Context, Data, Effect, Layer } from "effect"
import { lookup as systemLookup } from "node:dns/promises"
import { isIPv4, isIPv6 } from "node:net"
import { HubConfig } from "../Config.js"

export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "shared"
  | "unspecified"
  | "multicast"
  | "reserved"
  | "metadata"
  | "invalid"

const ipv4ToNumber = (address: string): number | undefined => {
  const parts = address.split(".")
  if (parts.length !== 4) return undefined
  let value = 0
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined
    const octet = Number(part)
    if (octet > 255) return undefined
    value = value * 256 + octet
  }
  return value
}

const inV4 = (value: number, base: string, bits: number): boolean => {
  const start = ipv4ToNumber(base) ?? 0
  const size = 2 ** (32 - bits)
  return value >= start && value < start + size
}

const METADATA_V4 = new Set(["169.254.169.254", "169.254.170.2", "100.100.100.200"])

const classifyV4 = (address: string): AddressClass => {
  const value = ipv4ToNumber(address)
  if (value === undefined) return "invalid"
  if (METADATA_V4.has(address)) return "metadata"
  if (inV4(value, "0.0.0.0", 8)) return "unspecified"
  if (inV4(value, "127.0.0.0", 8)) return "loopback"
  if (inV4(value, "10.0.0.0", 8) || inV4(value, "172.16.0.0", 12) || inV4(value, "192.168.0.0", 16)) return "private"
  if (inV4(value, "169.254.0.0", 16)) return "link-local"
  if (inV4(value, "100.64.0.0", 10)) return "shared"
  if (inV4(value, "224.0.0.0", 4)) return "multicast"
  if (
    inV4(value, "240.0.0.0", 4) || inV4(value, "192.0.0.0", 24) || inV4(value, "192.0.2.0", 24) ||
    inV4(value, "198.18.0.0", 15) || inV4(value, "198.51.100.0", 24) || inV4(value, "203.0.113.0", 24)
  ) return "reserved"
  return "public"
}

/** The eight 16-bit groups of an IPv6 address (an embedded dotted IPv4 tail included), or undefined. */
const ipv6Groups = (address: string): ReadonlyArray<number> | undefined => {
  let text = address.toLowerCase()
  const zone = text.indexOf("%")
  if (zone >= 0) text = text.slice(0, zone)
  const lastColon = text.lastIndexOf(":")
  const tail = text.slice(lastColon + 1)
  if (tail.includes(".")) {
    const v4 = ipv4ToNumber(tail)
    if (v4 === undefined) return undefined
    text = `${text.slice(0, lastColon + 1)}${Math.floor(v4 / 65536).toString(16)}:${(v4 % 65536).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN)))
  const head = parse(halves[0] ?? "")
  const rest = halves.length === 2 ? parse(halves[1] ?? "") : []
  const missing = 8 - head.length - rest.length
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined
  const groups = [...head, ...Array.from({ length: halves.length === 2 ? missing : 0 }, () => 0), ...rest]
  return groups.some(Number.isNaN) ? undefined : groups
}

const embeddedV4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`

const classifyV6 = (address: string): AddressClass => {
  const g = ipv6Groups(address)
  if (g === undefined) return "invalid"
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g
  const zeroHead = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0
  if (zeroHead && g5 === 0 && g6 === 0 && g7 === 0) return "unspecified"
  if (zeroHead && g5 === 0 && g6 === 0 && g7 === 1) return "loopback"
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) reach an IPv4 host.
  if (zeroHead && (g5 === 0xffff || g5 === 0)) return classifyV4(embeddedV4(g6, g7))
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return classifyV4(embeddedV4(g6, g7))
  if (g0 === 0x2002) return classifyV4(embeddedV4(g1, g2))
  if (g0 === 0xfd00 && g1 === 0x0ec2 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0 && g6 === 0 && g7 === 0x254) return "metadata"
  if ((g0 & 0xfe00) === 0xfc00) return "private"
  if ((g0 & 0xffc0) === 0xfe80) return "link-local"
  if ((g0 & 0xffc0) === 0xfec0) return "private"
  if ((g0 & 0xff00) === 0xff00) return "multicast"
  if ((g0 === 0x2001 && g1 === 0x0db8) || (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0)) return "reserved"
  return "public"
}

/** What kind of address an IP literal is; only "public" may be connected to under the policy. */
export const classifyAddress = (address: string): AddressClass => {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  if (isIPv4(bare)) return classifyV4(bare)
  if (isIPv6(bare)) return classifyV6(bare)
  return "invalid"
}

export class AddressRefused extends Data.TaggedError("AddressRefused")<{ readonly message: string }> {}

/** Where a delivery connects: the URL with the checked address as its host, plus the original host. */
export interface ConnectTarget {
  readonly url: string
  readonly hostHeader: string
  /** For https to a host name: the name to send as SNI and to verify the certificate against. */
  readonly serverName: string | undefined
}

export class UrlPolicy extends Context.Tag("UrlPolicy")<UrlPolicy, {
  /** Whether private addresses are refused (false in sandbox mode or with HUB_WEBHOOK_ALLOW_PRIVATE=true). */
  readonly enforced: boolean
  /** Checks where a URL leads, as at registration; the failure message says why it is refused. */
  readonly check: (url: string) => Effect.Effect<void, AddressRefused>
  /** Resolves and checks a URL's host for one delivery and pins the connection to a checked address. */
  readonly connectTarget: (url: string) => Effect.Effect<ConnectTarget, AddressRefused>
  /** The same as a plain promise, for the dispatcher's hot path (no fiber per delivery). */
  readonly resolveTarget: (url: string) => Promise<ConnectTarget | AddressRefused>
}>() {}

/** How long a host name's addresses are reused; every address is still checked on every delivery. */
const DNS_CACHE_MS = 5_000
const DNS_CACHE_SIZE = 1_000

const hostOf = (url: URL) => (url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname)

/** Every address of a host name, or why there is none. */
export type HostLookup = (host: string) => Promise<ReadonlyArray<string> | AddressRefused>

/** Every address of a host name, asked of the system resolver. */
const lookupHost: HostLookup = async (host) => {
  try {
    const answers = await systemLookup(host, { all: true, verbatim: true })
    return answers.length > 0 ? answers.map((a) => a.address) : new AddressRefused({ message: `the host ${host} has no address` })
  } catch {
    return new AddressRefused({ message: `the host ${host} could not be resolved` })
  }
}

/** A name's addresses, from a short cache; concurrent lookups of one name share one query. */
const makeCachedLookup = (lookup: HostLookup, clock: () => number): HostLookup => {
  const cache = new Map<string, { readonly addresses: Promise<ReadonlyArray<string> | AddressRefused>; readonly until: number }>()
  return (host) => {
    const now = clock()
    const cached = cache.get(host)
    if (cached !== undefined && cached.until > now) return cached.addresses
    if (cache.size >= DNS_CACHE_SIZE) cache.clear()
    const addresses = lookup(host)
    cache.set(host, { addresses, until: now + DNS_CACHE_MS })
    // A failed lookup is not remembered: the next delivery asks again.
    void addresses.then((answer) => {
      if (answer instanceof AddressRefused && cache.get(host)?.addresses === addresses) cache.delete(host)
    })
    return addresses
  }
}

/** Every address a host name resolves to (or the literal itself), refused if any one is not public. */
const checkAddresses = (host: string, literal: boolean, addresses: ReadonlyArray<string>, enforced: boolean) => {
  if (enforced) {
    for (const address of addresses) {
      const kind = classifyAddress(address)
      if (kind !== "public") {
        return new AddressRefused({
          message: literal
            ? `${address} is a ${kind} address; webhooks must reach a public address`
            : `${host} resolves to ${address}, a ${kind} address; webhooks must reach a public address`
        })
      }
    }
  }
  // IPv4 first: a dual-stack name reaches the receiver whichever family it listens on.
  return [...addresses].sort((a, b) => Number(isIPv6(a)) - Number(isIPv6(b)))
}

const checkedAddresses = async (host: string, enforced: boolean, resolve: HostLookup): Promise<ReadonlyArray<string> | AddressRefused> => {
  // An IP literal needs no lookup.
  const literal = isIPv4(host) || isIPv6(host)
  const addresses = literal ? [host] : await resolve(host)
  return addresses instanceof AddressRefused ? addresses : checkAddresses(host, literal, addresses, enforced)
}

const fromPromise = <A>(promise: () => Promise<A | AddressRefused>): Effect.Effect<A, AddressRefused> =>
  Effect.flatMap(Effect.promise(promise), (result) => (result instanceof AddressRefused ? Effect.fail(result) : Effect.succeed(result)))

/** `lookup` and `clock` are the system resolver and clock unless a test gives its own. */
export const makeUrlPolicy = (
  enforced: boolean,
  options: { readonly lookup?: HostLookup; readonly clock?: () => number } = {}
): UrlPolicy["Type"] => {
  const lookup = options.lookup ?? lookupHost
  const resolve = makeCachedLookup(lookup, options.clock ?? Date.now)
  // A webhook's URL is the same text on every delivery: parse it once.
  const parsedUrls = new Map<string, URL | null>()
  const parseUrl = (text: string): URL | null => {
    const known = parsedUrls.get(text)
    if (known !== undefined) return known
    if (parsedUrls.size >= DNS_CACHE_SIZE) parsedUrls.clear()
    const url = URL.parse(text)
    parsedUrls.set(text, url)
    return url
  }
  const resolveTarget = async (text: string): Promise<ConnectTarget | AddressRefused> => {
    const url = parseUrl(text)
    if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
      return new AddressRefused({ message: "the webhook URL is not an http or https URL" })
    }
    const host = hostOf(url)
    const addresses = await checkedAddresses(host, enforced, resolve)
    if (addresses instanceof AddressRefused) return addresses
    const [address] = addresses
    const hostHeader = url.host
    if (address === undefined || address === host) return { url: url.href, hostHeader, serverName: undefined }
    const pinned = new URL(url.href)
    pinned.hostname = isIPv6(address) ? `[${address}]` : address
    return { url: pinned.href, hostHeader, serverName: url.protocol === "https:" ? host : undefined }
  }
  return {
    enforced,
    check: (text) =>
      Effect.gen(function*() {
        const url = URL.parse(text)
        if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
          return yield* new AddressRefused({ message: "must be an http or https URL" })
        }
        // Without enforcement any host is accepted at registration, resolvable or not; registration
        // always asks the resolver afresh.
        if (enforced) yield* fromPromise(() => checkedAddresses(hostOf(url), enforced, lookup))
      }),
    connectTarget: (text) => fromPromise(() => resolveTarget(text)),
    resolveTarget
  }
}

export const UrlPolicyLive = Layer.effect(
  UrlPolicy,
  Effect.map(HubConfig, (config) => makeUrlPolicy(config.upstream !== "sandbox" && !config.webhookAllowPrivate))
)
