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
import { SendQueueRepo } from "./Repo.js"

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
  readonly checkedAt: number
}

export class Throughput extends Effect.Service<Throughput>()("Throughput", {
  effect: Effect.gen(function*() {
    const repo = yield* SendQueueRepo
    const upstream = yield* Upstream
    const access = yield* InstanceAccess
    const { sendRateCap } = yield* HubConfig
    const clock = yield* Effect.clock
    const known = new Map<string, Known>()
    const refreshing = new Set<string>()

    /** The number's rate now, from what is known (no read): the send's pacing asks it on every send. */
    const rateNow = (phoneNumberId: string): number => sendRateOf(known.get(phoneNumberId)?.level, sendRateCap)

    /** Reads the number's level from the Graph and keeps it; a failed read keeps what was known (logged). */
    const readLevel = (instance: InstanceRef) =>
      Effect.gen(function*() {
        const target = yield* access.target(instance)
        const answer = yield* upstream.getPhoneNumber(target, { fields: "throughput" })
        const level = levelOfAnswer(answer)
        if (level === undefined) {
          return yield* Effect.logWarning(
            "The Graph's answer named no throughput level; the number keeps the one known",
            {
              phoneNumberId: instance.phoneNumberId
            }
          )
        }
        const checkedAt = clock.unsafeCurrentTimeMillis()
        known.set(instance.phoneNumberId, { level, checkedAt })
        yield* repo.saveLevel(instance.phoneNumberId, level, checkedAt)
      }).pipe(
        Effect.catchAll((cause) =>
          Effect.logWarning("Could not read a number's throughput level; it keeps the one known", {
            phoneNumberId: instance.phoneNumberId,
            cause
          })
        )
      )

    /**
     * Makes sure the number's level is fresh: from the database when another replica read it within the
     * hour, otherwise from the Graph. Cheap when fresh (a map read).
     */
    const refresh = (instance: InstanceRef): Effect.Effect<void> =>
      Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        const current = known.get(instance.phoneNumberId)
        if (current !== undefined && now - current.checkedAt < LEVEL_TTL_MS) return Effect.void
        if (refreshing.has(instance.phoneNumberId)) return Effect.void
        refreshing.add(instance.phoneNumberId)
        return Effect.gen(function*() {
          const stored = yield* Effect.either(repo.levelOf(instance.phoneNumberId))
          if (Either.isRight(stored) && stored.right !== undefined && now - stored.right.checked_at < LEVEL_TTL_MS) {
            known.set(instance.phoneNumberId, { level: stored.right.level, checkedAt: stored.right.checked_at })
            return
          }
          yield* readLevel(instance)
        }).pipe(Effect.ensuring(Effect.sync(() => refreshing.delete(instance.phoneNumberId))))
      })

    /** Meta upgraded the number (THROUGHPUT_UPGRADE): the new level holds at once, on this replica and the next read of others. */
    const raise = (phoneNumberId: string, level: string) =>
      Effect.suspend(() => {
        const checkedAt = clock.unsafeCurrentTimeMillis()
        known.set(phoneNumberId, { level, checkedAt })
        return repo.saveLevel(phoneNumberId, level, checkedAt)
      })

    return { rateNow, refresh, raise, levelNow: (phoneNumberId: string) => known.get(phoneNumberId)?.level } as const
  }),
  dependencies: [SendQueueRepo.Default, InstanceAccess.Default]
}) {}
