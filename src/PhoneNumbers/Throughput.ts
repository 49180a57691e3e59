/**
 * Each number's throughput, Meta's live one: the level the Graph gives (`GET /{phone-number-id}?fields=throughput`),
 * read when a number is first used and again hourly, kept in `number_throughput` so replicas and restarts share
 * it, and raised at once by a `phone_number_quality_update` with `THROUGHPUT_UPGRADE`. HUB_SEND_RATE, when set,
 * caps every number below its level. Until a number's level is known it is paced at the standard level.
 */
import { Effect, Either } from "effect"
import { HubConfig } from "../Config.js"
import { isRecord, type JsonObject } from "../Domain/Json.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { Upstream } from "../Upstream/Upstream.js"
import { STALE, ThroughputRepo } from "./ThroughputRepo.js"

/** Messages per second of each level Meta names (inbound and outbound together) [platform-2026 §5]. */
const LEVEL_RATES: Readonly<Record<string, number>> = {
  COEXISTENCE: 20,
  STANDARD: 80,
  HIGH: 1_000
}

/** The level a number has until the Graph says otherwise, and its rate. */
const DEFAULT_LEVEL = "STANDARD"
const STANDARD_RATE = 80

/** How long a level read from the Graph is trusted before it is read again. */
const LEVEL_TTL_MS = 3_600_000

/**
 * A number's send rate: its level's (a level not known yet, or one Meta adds later, paced as standard),
 * under HUB_SEND_RATE when that is set.
 */
export const sendRateOf = (level: string | undefined, cap: number | undefined): number => {
  const rate = LEVEL_RATES[(level ?? DEFAULT_LEVEL).toUpperCase()] ?? STANDARD_RATE
  return cap === undefined ? rate : Math.min(rate, cap)
}

/** `{throughput: {level}}` of `GET /{phone-number-id}?fields=throughput`. */
const levelOfAnswer = (answer: JsonObject): string | undefined => {
  const throughput = answer.throughput
  return isRecord(throughput) && typeof throughput.level === "string" ? throughput.level : undefined
}

interface Known {
  readonly level: string
  /** When the Graph said it (shared through the database). */
  readonly checkedAt: number
  /** Until when this replica trusts it without looking at the database again. */
  readonly trustedUntil: number
}

/**
 * How long a replica trusts what it knows before it looks at the database again: a level another
 * replica read, or one a THROUGHPUT_UPGRADE marked stale (`expireLevels`), holds here within this.
 */
const RECHECK_MS = 5_000

/** After a failed read of the Graph, the number is asked again no sooner than this. */
const FAILED_READ_PAUSE_MS = 60_000

export class Throughput extends Effect.Service<Throughput>()("Throughput", {
  effect: Effect.gen(function*() {
    const repo = yield* ThroughputRepo
    const upstream = yield* Upstream
    const access = yield* InstanceAccess
    const { sendRateCap } = yield* HubConfig
    const clock = yield* Effect.clock
    const known = new Map<string, Known>()
    const refreshing = new Set<string>()

    /** The number's rate now, from what is known (no read): the send's pacing asks it on every send. */
    const rateNow = (phoneNumberId: string): number => sendRateOf(known.get(phoneNumberId)?.level, sendRateCap)

    /** Whether what this replica knows of the number may be used without a read (a map read). */
    const freshNow = (phoneNumberId: string): boolean => {
      const current = known.get(phoneNumberId)
      return current !== undefined && clock.unsafeCurrentTimeMillis() < current.trustedUntil
    }

    /** Reads the number's level from the Graph and keeps it; a failed read keeps what was known (logged). */
    const readLevel = (instance: InstanceRef, now: number) =>
      Effect.gen(function*() {
        const target = yield* access.target(instance)
        const answer = yield* upstream.getPhoneNumber(target, { fields: "throughput" })
        const level = levelOfAnswer(answer)
        if (level === undefined) return yield* Effect.fail("the Graph's answer named no throughput level")
        known.set(instance.phoneNumberId, { level, checkedAt: now, trustedUntil: now + RECHECK_MS })
        yield* repo.save(instance.phoneNumberId, level, now)
      }).pipe(
        Effect.catchAll((cause) => {
          const current = known.get(instance.phoneNumberId)
          known.set(instance.phoneNumberId, {
            level: current?.level ?? DEFAULT_LEVEL,
            checkedAt: current?.checkedAt ?? 0,
            trustedUntil: now + FAILED_READ_PAUSE_MS
          })
          return Effect.logWarning("Could not read a number's throughput level; it keeps the one known", {
            phoneNumberId: instance.phoneNumberId,
            cause
          })
        })
      )

    /**
     * Makes sure the number's level is fresh: what this replica read within RECHECK_MS, else the
     * database's when the Graph said it within the hour, else the Graph's. A map read when fresh.
     */
    const refresh = (instance: InstanceRef): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (freshNow(instance.phoneNumberId) || refreshing.has(instance.phoneNumberId)) return Effect.void
        refreshing.add(instance.phoneNumberId)
        const now = clock.unsafeCurrentTimeMillis()
        return Effect.gen(function*() {
          const stored = yield* Effect.either(repo.levelOf(instance.phoneNumberId))
          const fresh = Either.isRight(stored) && stored.right !== undefined && stored.right.checked_at !== STALE &&
            now - stored.right.checked_at < LEVEL_TTL_MS
          if (fresh) {
            known.set(instance.phoneNumberId, {
              level: stored.right.level,
              checkedAt: stored.right.checked_at,
              trustedUntil: now + RECHECK_MS
            })
            return
          }
          yield* readLevel(instance, now)
        }).pipe(Effect.ensuring(Effect.sync(() => refreshing.delete(instance.phoneNumberId))))
      })

    return { rateNow, freshNow, refresh } as const
  }),
  dependencies: [ThroughputRepo.Default, InstanceAccess.Default]
}) {}
