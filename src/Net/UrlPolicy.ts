/**
 * SSRF protection for webhook URLs. Outside sandbox mode (and unless HUB_WEBHOOK_ALLOW_PRIVATE=true)
 * a URL whose host is or resolves to any address that is not globally reachable (AddressRanges.ts) is
 * refused when it is registered; cloud metadata addresses are refused whatever the settings. At
 * delivery time the host is resolved again, under the attempt's deadline, every address is checked,
 * and the request goes to the checked address itself (the original host kept in `Host` and, for
 * https, as the TLS server name), so a DNS answer that changes between the check and the connection
 * (rebinding) cannot redirect it. A host that cannot be pinned (no address, an answer that is not an
 * IP address, an IPv6 zone a URL cannot hold) is refused, never connected to by name, whatever the
 * settings. Refusals never echo a resolved address: they would reveal internal DNS.
 */
import { Context, Data, Duration, Effect, Layer } from "effect"
import ipaddr from "ipaddr.js"
import { LRUCache } from "lru-cache"
import { lookup as systemLookup } from "node:dns/promises"
import { isIPv4, isIPv6 } from "node:net"
import { HubConfig } from "../Config.js"
import { type AddressClass, classifyAddress, describeClass } from "./AddressRanges.js"

export class AddressRefused extends Data.TaggedError("AddressRefused")<{ readonly message: string }> {}

/** Where a delivery connects: the URL with the checked address as its host, plus the original host. */
export interface ConnectTarget {
  readonly url: string
  readonly hostHeader: string
  /** For https to a host name: the name to send as SNI and to verify the certificate against. */
  readonly serverName: string | undefined
}

export class UrlPolicy extends Context.Tag("UrlPolicy")<UrlPolicy, {
  /**
   * Whether every non-public address is refused (false in sandbox mode or with
   * HUB_WEBHOOK_ALLOW_PRIVATE=true, when only cloud metadata addresses are).
   */
  readonly enforced: boolean
  /** Checks where a URL leads, as at registration; the failure message says why it is refused. */
  readonly check: (url: string) => Effect.Effect<void, AddressRefused>
  /**
   * Resolves and checks a URL's host for one delivery and pins the connection to a checked address:
   * a plain promise, for the dispatcher's hot path (no fiber per delivery). `signal` is the attempt's:
   * when it aborts, a lookup still waiting is given up (the answer is a refusal naming the abort's
   * reason), so a resolver that never answers holds the attempt no longer than its deadline.
   */
  readonly connectTarget: (url: string, signal: AbortSignal) => Promise<ConnectTarget | AddressRefused>
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
    return answers.length > 0
      ? answers.map((a) => a.address)
      : new AddressRefused({ message: `the host ${host} has no address` })
  } catch {
    return new AddressRefused({ message: `the host ${host} could not be resolved` })
  }
}

/** The resolver the hub's policy asks: the system's (`HostResolver.System`), or a test's table. */
export class HostResolver extends Context.Tag("HostResolver")<HostResolver, HostLookup>() {
  static readonly System = Layer.succeed(HostResolver, lookupHost)
}

/** A name's addresses, from a short cache; concurrent lookups of one name share one query. */
const makeCachedLookup = (lookup: HostLookup, clock: () => number): HostLookup => {
  const cache = new LRUCache<
    string,
    { readonly addresses: Promise<ReadonlyArray<string> | AddressRefused>; readonly until: number }
  >({ max: DNS_CACHE_SIZE })
  return (host) => {
    const now = clock()
    const cached = cache.get(host)
    if (cached !== undefined && cached.until > now) return cached.addresses
    const addresses = settled(host, lookup)
    cache.set(host, { addresses, until: now + DNS_CACHE_MS })
    // A failed lookup is not remembered: the next delivery asks again.
    void addresses.then((answer) => {
      if (answer instanceof AddressRefused && cache.get(host)?.addresses === addresses) cache.delete(host)
    })
    return addresses
  }
}

/** A lookup whose failure, thrown or answered, is a refusal. */
const settled = (host: string, lookup: HostLookup): Promise<ReadonlyArray<string> | AddressRefused> =>
  lookup(host).catch(() => new AddressRefused({ message: `the host ${host} could not be resolved` }))

const reasonOf = (
  signal: AbortSignal
): string => (signal.reason instanceof Error ? signal.reason.message : "the attempt was stopped")

/**
 * A lookup's answer, or a refusal as soon as `signal` aborts. The lookup itself runs on (the system
 * resolver cannot be cancelled, and other deliveries may share it); only this wait is given up.
 */
const lookupUntil = (
  host: string,
  lookup: HostLookup,
  signal: AbortSignal
): Promise<ReadonlyArray<string> | AddressRefused> => {
  const gaveUp = () => new AddressRefused({ message: `the host ${host} could not be resolved: ${reasonOf(signal)}` })
  if (signal.aborted) return Promise.resolve(gaveUp())
  return new Promise((resolve) => {
    const abort = () => resolve(gaveUp())
    signal.addEventListener("abort", abort, { once: true })
    void settled(host, lookup).then((answer) => {
      signal.removeEventListener("abort", abort)
      resolve(answer)
    })
  })
}

/**
 * Whether an address of this class is refused: cloud metadata always, and an answer that is not an
 * IP address (a connection could only go to it by name, unchecked); the rest of the non-public ones when enforced.
 */
const isRefused = (kind: AddressClass, enforced: boolean) =>
  kind === "metadata" || kind === "invalid" || (enforced && kind !== "public")

/** Every address a host name resolves to (or the literal itself), refused if any one is refused. */
const checkAddresses = (host: string, literal: boolean, addresses: ReadonlyArray<string>, enforced: boolean) => {
  for (const address of addresses) {
    const kind = classifyAddress(address)
    if (isRefused(kind, enforced)) {
      // A literal is the caller's own text; a resolved address is never echoed (it would map internal DNS).
      return new AddressRefused({
        message: literal
          ? `${host} is not a public address (${describeClass(kind)}); webhooks must reach a public address`
          : kind === "invalid"
          ? `the host ${host} resolves to something that is not an IP address, which a connection cannot be pinned to`
          : `${host} resolves to a non-public address; webhooks must reach a public address`
      })
    }
  }
  // IPv4 first: a dual-stack name reaches the receiver whichever family it listens on.
  return [...addresses].sort((a, b) => Number(isIPv6(a)) - Number(isIPv6(b)))
}

const isLiteral = (host: string) => isIPv4(host) || isIPv6(host)

/**
 * `url` with `address` as its host, or undefined when the URL cannot hold it: the URL parser ignores
 * a host it refuses (an IPv6 zone such as fe80::1%eth0), which would leave the name in place.
 */
const pinnedTo = (url: URL, address: string): URL | undefined => {
  if (!isLiteral(address)) return undefined
  const pinned = new URL(url.href)
  pinned.hostname = isIPv6(address) ? `[${address}]` : address
  return sameAddress(hostOf(pinned), address) ? pinned : undefined
}

const sameAddress = (a: string, b: string) =>
  ipaddr.isValid(a) && ipaddr.isValid(b) &&
  ipaddr.parse(a).toNormalizedString() === ipaddr.parse(b).toNormalizedString()

const checkedAddresses = async (
  host: string,
  enforced: boolean,
  resolve: HostLookup,
  signal: AbortSignal
): Promise<ReadonlyArray<string> | AddressRefused> => {
  // An IP literal needs no lookup.
  const literal = isLiteral(host)
  const addresses = literal ? [host] : await lookupUntil(host, resolve, signal)
  return addresses instanceof AddressRefused ? addresses : checkAddresses(host, literal, addresses, enforced)
}

const fromPromise = <A>(
  promise: (signal: AbortSignal) => Promise<A | AddressRefused>
): Effect.Effect<A, AddressRefused> =>
  Effect.flatMap(
    Effect.promise(promise),
    (result) => (result instanceof AddressRefused ? Effect.fail(result) : Effect.succeed(result))
  )

/**
 * `lookup` and `clock` are the system resolver and clock unless a test gives its own; `lookupTimeout`
 * bounds the lookup at registration (deliveries use their attempt's deadline).
 */
export const makeUrlPolicy = (
  enforced: boolean,
  options: { readonly lookup?: HostLookup; readonly clock?: () => number; readonly lookupTimeout?: Duration.Duration } =
    {}
): UrlPolicy["Type"] => {
  const lookup = options.lookup ?? lookupHost
  const resolve = makeCachedLookup(lookup, options.clock ?? Date.now)
  const lookupTimeout = options.lookupTimeout ?? Duration.seconds(20)
  // A webhook's URL is the same text on every delivery: parse it once.
  const parsedUrls = new LRUCache<string, { readonly url: URL | null }>({ max: DNS_CACHE_SIZE })
  const parseUrl = (text: string): URL | null => {
    const known = parsedUrls.get(text)
    if (known !== undefined) return known.url
    const url = URL.parse(text)
    parsedUrls.set(text, { url })
    return url
  }
  const connectTarget = async (text: string, signal: AbortSignal): Promise<ConnectTarget | AddressRefused> => {
    const url = parseUrl(text)
    if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
      return new AddressRefused({ message: "the webhook URL is not an http or https URL" })
    }
    const host = hostOf(url)
    const addresses = await checkedAddresses(host, enforced, resolve, signal)
    if (addresses instanceof AddressRefused) return addresses
    const hostHeader = url.host
    if (isLiteral(host)) return { url: url.href, hostHeader, serverName: undefined }
    // The first checked address a URL can hold; never the name, which would be resolved again, unchecked.
    for (const address of addresses) {
      const pinned = pinnedTo(url, address)
      if (pinned !== undefined) {
        return { url: pinned.href, hostHeader, serverName: url.protocol === "https:" ? host : undefined }
      }
    }
    return new AddressRefused({ message: `the host ${host} resolves to no address a connection can be pinned to` })
  }
  return {
    enforced,
    check: (text) =>
      Effect.gen(function*() {
        const url = URL.parse(text)
        if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
          return yield* new AddressRefused({ message: "must be an http or https URL" })
        }
        const host = hostOf(url)
        // Registration always asks the resolver afresh, within a deadline. Without enforcement any host
        // name is accepted unresolved (a literal is still checked for cloud metadata); deliveries check
        // every address they resolve, so a name leading to metadata is refused there.
        if (!enforced && !isLiteral(host)) return
        yield* fromPromise((interrupted) =>
          checkedAddresses(
            host,
            enforced,
            lookup,
            AbortSignal.any([interrupted, AbortSignal.timeout(Duration.toMillis(lookupTimeout))])
          )
        )
      }),
    connectTarget
  }
}

export const UrlPolicyLive = Layer.effect(
  UrlPolicy,
  Effect.gen(function*() {
    const config = yield* HubConfig
    return makeUrlPolicy(config.upstream !== "sandbox" && !config.webhookAllowPrivate, {
      lookup: yield* HostResolver,
      lookupTimeout: config.webhookTimeout
    })
  })
)
