/**
 * Turns a Bearer secret into a Principal. Live credentials are cached in memory by hash so the hot
 * path does not query the database. A revocation evicts at once in the process that makes it; on
 * PostgreSQL every replica hears it as it commits (Sql/Notify.ts), and every process on the database
 * reads it within about a second from the revocation feed (RevocationFeed.ts); entries also expire
 * after a minute.
 */
import { Effect, Either, Option, Runtime } from "effect"
import { LRUCache } from "lru-cache"
import { Unauthorized } from "../Domain/Errors.js"
import { nowIso } from "../Domain/Ids.js"
import type { Principal } from "../Domain/Principal.js"
import { channels, subscribe } from "../Sql/Notify.js"
import { type Credential, TokensRepo, TokensRepoLive } from "./Repo.js"
import { hashSecret } from "./Secrets.js"

const CACHE_TTL_MS = 60_000
const CACHE_CAPACITY = 10_000
/** last_used_at is a hint, not an audit log: write it at most this often per token. */
const TOUCH_INTERVAL_MS = 60_000

interface CacheEntry {
  readonly credential: Credential
  /** The answer for this credential, built once: a cache hit allocates nothing. */
  readonly admitted: Either.Either<Principal, Unauthorized>
  readonly cachedAt: number
}

interface TokenResolverShape {
  readonly resolve: (secret: string) => Effect.Effect<Principal, Unauthorized>
  /** resolve's answer when it needs no database read; undefined when it does (a credential not cached). */
  readonly resolveNow: (secret: string) => Either.Either<Principal, Unauthorized> | undefined
  /** Forgets credentials at once, after their revocation has committed. */
  readonly forget: (...tokenHashes: ReadonlyArray<string>) => Effect.Effect<void>
  /**
   * Calls `recheck` whenever the credential of this hash may have been revoked (by this process, an
   * announcement from another replica, or the revocation feed; every credential after the listener
   * reconnects), until the returned function is called. For holders of long requests (event streams).
   */
  readonly watch: (tokenHash: string, recheck: () => void) => () => void
}

const toEntry = (credential: Credential, cachedAt: number): CacheEntry => ({
  credential,
  admitted: Either.right({
    kind: credential.kind,
    credentialId: credential.credentialId,
    organizationId: credential.organizationId,
    instance: credential.instance,
    ...(credential.expiresAt === undefined ? {} : { expiresAt: credential.expiresAt })
  }),
  cachedAt
})

export class TokenResolver extends Effect.Service<TokenResolver>()("TokenResolver", {
  scoped: Effect.gen(function*() {
    const repo = yield* TokensRepo
    // The touch is a hint written in the background, from the plain path too (resolveNow).
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const cache = new LRUCache<string, CacheEntry>({ max: CACHE_CAPACITY })
    const touchedAt = new LRUCache<string, number>({ max: CACHE_CAPACITY })
    /**
     * Counts revocations. A lookup that read a credential before a revocation committed and finishes
     * after its eviction must not put it back: it caches only if no revocation happened meanwhile
     * (any revocation, not only its own: they are rare, and the next request reads again).
     */
    let revocations = 0
    /** Who holds a long request on a credential, by its hash (see watch). */
    const watchers = new Map<string, Set<() => void>>()
    const recheck = (hash: string) => watchers.get(hash)?.forEach((call) => call())
    const recheckAll = () => watchers.forEach((calls) => calls.forEach((call) => call()))
    // On PostgreSQL, revocations on other replicas as they commit; while not listening, announcements are missed: start over then.
    yield* subscribe(channels.credentials, (hash) => {
      revocations++
      cache.delete(hash)
      recheck(hash)
    }, () => {
      revocations++
      cache.clear()
      recheckAll()
    })

    const load = (hash: string, now: number): Effect.Effect<CacheEntry | undefined> =>
      Effect.suspend(() => {
        const revocationsBefore = revocations
        return Effect.map(repo.findCredential(hash), (found) => {
          if (Option.isNone(found)) {
            cache.delete(hash)
            return undefined
          }
          const entry = toEntry(found.value, now)
          if (revocations !== revocationsBefore) return entry
          cache.set(hash, entry)
          return entry
        })
      })

    /** The principal, unless the credential expired; notes the token's use at most once a minute. */
    const admit = (entry: CacheEntry, now: number): Either.Either<Principal, Unauthorized> => {
      const credential = entry.credential
      if (credential.expiresAt !== undefined && credential.expiresAt <= now) return Either.left(new Unauthorized())
      if (credential.kind !== "session" && now - (touchedAt.get(credential.credentialId) ?? 0) >= TOUCH_INTERVAL_MS) {
        touchedAt.set(credential.credentialId, now)
        runFork(repo.touchApiToken(credential.credentialId, nowIso()))
      }
      return entry.admitted
    }

    const malformed = (secret: string) => secret.length < 8 || secret.length > 200

    /** The cached entry's answer, or undefined when the credential must be read from the database. */
    const cachedAnswer = (hash: string, now: number): Either.Either<Principal, Unauthorized> | undefined => {
      const hit = cache.get(hash)
      return hit !== undefined && now - hit.cachedAt < CACHE_TTL_MS ? admit(hit, now) : undefined
    }

    const service: TokenResolverShape = {
      resolveNow: (
        secret
      ) => (malformed(secret) ? Either.left(new Unauthorized()) : cachedAnswer(hashSecret(secret), Date.now())),
      resolve: (secret) => {
        if (malformed(secret)) return Effect.fail(new Unauthorized())
        const now = Date.now()
        const hash = hashSecret(secret)
        return cachedAnswer(hash, now) ??
          Effect.flatMap(
            load(hash, now),
            (entry) => entry === undefined ? Effect.fail(new Unauthorized()) : admit(entry, now)
          )
      },
      forget: (...hashes) =>
        Effect.sync(() => {
          revocations++
          for (const hash of hashes) cache.delete(hash)
          for (const hash of hashes) recheck(hash)
        }),
      watch: (hash, call) => {
        const calls = watchers.get(hash) ?? new Set<() => void>()
        calls.add(call)
        watchers.set(hash, calls)
        return () => {
          calls.delete(call)
          if (calls.size === 0 && watchers.get(hash) === calls) watchers.delete(hash)
        }
      }
    }
    return service
  }),
  dependencies: [TokensRepoLive]
}) {}
