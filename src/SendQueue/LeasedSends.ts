/**
 * One leased send, from its turn to its outcome: its slot in its number's pace (`slotted`), its place
 * in the number's pacing (`paced`, the budget synchronous sends take from too: Messages/Pacing.ts),
 * `sending` (in a group commit: SendQueue/Repo.ts claimWriter), the Graph call, and its outcome
 * recorded and told (SendQueue/Outcomes.ts `settle`). A send whose Graph call began is never made
 * again: if its replica dies, the lease runs out and the send ends `outcome_unknown`.
 *
 * Plain async code, not an effect, as the synchronous send's core is (Messages/Send.ts): it is the
 * path of every queued send, and as a fiber with its combinators it cost the drain most of its CPU
 * (docs/PERFORMANCE.md, "The drain as plain async code"). Its steps are the services' plain entries
 * (pacing, the cached target, the group writers, the Upstream's send); the rare ones (a target to
 * load, a send given up, a refusal or a retry recorded, a database outage waited out) run as effects
 * through `run`.
 */
import { Cause, Effect, Either, Exit } from "effect"
import type { InstanceRef } from "../Domain/Principal.js"
import type { InstanceAccess } from "../Instances/InstanceAccess.js"
import type { Pacing } from "../Messages/Pacing.js"
import type { Throughput } from "../PhoneNumbers/Throughput.js"
import { untilStored } from "../Sql/Unavailable.js"
import { type SendEndpoint, sendEndpoints, type Upstream } from "../Upstream/Upstream.js"
import type { LevelWindows } from "./LevelWindows.js"
import { giveUp, parsedBody, refOf, settle, type SettleContext } from "./Outcomes.js"
import type { QueuedRow } from "./Repo.js"
import { priorityRank } from "./Rules.js"

/** Timed waits that end at once, answering false, when the drainer stops (a send waiting its turn is then given back). */
export interface Turns {
  readonly wait: (ms: number) => Promise<boolean>
  readonly stopped: () => boolean
  readonly stop: () => void
}

export const makeTurns = (): Turns => {
  const waiting = new Set<() => void>()
  let stopped = false
  return {
    wait: (ms) =>
      stopped ? Promise.resolve(false) : new Promise<boolean>((resolve) => {
        const cut = () => {
          clearTimeout(timer)
          waiting.delete(cut)
          resolve(false)
        }
        const timer = setTimeout(() => {
          waiting.delete(cut)
          resolve(true)
        }, ms)
        waiting.add(cut)
      }),
    stopped: () => stopped,
    stop: () => {
      stopped = true
      for (const cut of [...waiting]) cut()
    }
  }
}

/** What a leased send works with. */
export interface LeasedSendContext extends SettleContext {
  readonly upstream: Upstream["Type"]
  readonly access: InstanceAccess
  readonly pacing: Pacing["Type"]
  readonly throughput: Throughput
  readonly owner: string
  /** A call in flight must never look lost: the lease of a send outlasts the Graph's deadline. */
  readonly sendingLeaseMs: number
  readonly turns: Turns
  /** Per number, when this replica's next queued send may go (`slotted`). */
  readonly slots: Map<string, number>
  /** Each number's calls under its level as Meta counts it. */
  readonly levels: LevelWindows
}

const isEndpoint = (text: string): text is SendEndpoint => sendEndpoints.some((endpoint) => endpoint === text)

export const instanceOf = (row: QueuedRow): InstanceRef => ({
  id: row.instance_id,
  organizationId: row.organization_id,
  phoneNumberId: row.phone_number_id,
  wabaId: row.waba_id
})

/**
 * The send's slot: a replica's queued sends of one number go one every 1/rate seconds, never in a burst, so
 * no one-second window holds more than the number's level (the pacing's bucket allows a second's burst, which
 * a backlog due at once would take on top of the refill: scripts/bench.ts --scenarios queue saw 161 in one
 * second at 80/s before this). False if the drainer stopped first.
 */
const slotted = (c: LeasedSendContext, row: QueuedRow): boolean | Promise<boolean> => {
  const now = c.now()
  const slot = Math.max(c.slots.get(row.phone_number_id) ?? now, now)
  c.slots.set(row.phone_number_id, slot + 1000 / c.throughput.rateNow(row.phone_number_id))
  return slot > now ? c.turns.wait(slot - now) : true
}

/** Waits for the send's place in its number's pacing (bulk yields to transactional); false if the drainer stopped first. */
const paced = async (c: LeasedSendContext, row: QueuedRow): Promise<boolean> => {
  const lane = row.priority === priorityRank.bulk ? "bulk" : "first"
  for (;;) {
    // A promise only on PostgreSQL, when this replica must ask the fleet's shared budget (Pacing.ts).
    const taken = c.pacing.takeAt(row.phone_number_id, c.now(), lane)
    const refused = taken instanceof Promise ? await taken : taken
    if (refused === undefined) return !c.turns.stopped()
    if (!(await c.turns.wait(1000 / c.throughput.rateNow(row.phone_number_id)))) return false
  }
}

/** Leased sends whose turn did not come (the drainer stopping, the database failing): back to the queue. */
const giveBack = (c: LeasedSendContext, row: QueuedRow) =>
  c.run(Effect.ignoreLogged(untilStored(c.repo.giveBack([row.message_id], c.owner))))

/** A leased send whose turn came: `sending`, the Graph call, the outcome recorded. */
const sendNow = async (c: LeasedSendContext, row: QueuedRow): Promise<void> => {
  if (c.now() >= row.expires_at) return c.run(giveUp(c, refOf(row), "expired", undefined))
  const instance = instanceOf(row)
  const cached = c.access.targetNow(instance)
  const target = cached === undefined ? await c.run(Effect.either(c.access.target(instance))) : Either.right(cached)
  if (Either.isLeft(target)) {
    // The instance is gone or cannot reach Meta: a later try would fare the same.
    return c.run(giveUp(c, refOf(row), "refused", { message: target.left.message }))
  }
  const claimed = await c.repo.claimSendingNow(row.message_id, c.owner, c.now() + c.sendingLeaseMs)
  if (Exit.isFailure(claimed)) return failed(c, row, claimed.cause)
  // Cancelled while it waited its turn (or no longer this replica's): not sent, nothing to record.
  if (!claimed.value) return
  const endpoint = isEndpoint(row.endpoint) ? row.endpoint : "messages"
  let sentAt = 0
  // Under the number's level as Meta counts it (SendQueue/LevelWindows.ts): claims commit in groups,
  // so sends that one commit held back would otherwise reach Meta together.
  const outcome = await c.levels.call(row.phone_number_id, c.throughput.rateNow(row.phone_number_id), () => {
    sentAt = c.now()
    return c.upstream.sendMessage(target.right, parsedBody(row.body), endpoint)
  })
  await settle(c, row, sentAt, outcome)
}

/**
 * Failed before its Graph call (the database failing its claim): queued again at once rather than when
 * its lease runs out. Once `sending`, giveBack leaves it: its lease decides.
 */
const failed = async (c: LeasedSendContext, row: QueuedRow, cause: Cause.Cause<unknown>) => {
  await c.run(Effect.logError("A queued send could not be settled; given back to the queue unless its call began", {
    messageId: row.message_id,
    cause
  }))
  await giveBack(c, row)
}

/**
 * One leased send: its turn (given back to the queue if the drainer stops first), then the send, which
 * once begun runs to its end (the Graph call has its deadline). Never rejects.
 */
export const sendLeased = async (c: LeasedSendContext, row: QueuedRow): Promise<void> => {
  try {
    const slot = slotted(c, row)
    const turnCame = (typeof slot === "boolean" ? slot : await slot) && (await paced(c, row))
    return turnCame ? await sendNow(c, row) : await giveBack(c, row)
  } catch (defect) {
    return failed(c, row, Cause.die(defect))
  }
}
