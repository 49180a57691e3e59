/**
 * The bound on sends in flight (HUB_SEND_MAX_IN_FLIGHT, and per organization), and the wait for
 * them to end before the hub stops. Plain counters and callbacks: it is on every send's path.
 */
import { Effect } from "effect"
import { ServiceUnavailable } from "../Domain/Errors.js"

export interface InFlightGate<Outcome> {
  /** Runs a send counted in flight, and tells its outcome (to the metrics). */
  readonly run: (organizationId: string, send: () => Promise<Outcome>) => Promise<Outcome>
  /** Succeeds once no send is in flight. */
  readonly drained: Effect.Effect<void>
  /** How many sends are in flight now. */
  readonly inFlight: () => number
  /** The 503 a send of this organization is refused with now; undefined when it may run. */
  readonly overloaded: (organizationId: string) => ServiceUnavailable | undefined
}

/**
 * The sends in flight, of all and per organization: past HUB_SEND_MAX_IN_FLIGHT, or
 * HUB_SEND_MAX_IN_FLIGHT_PER_ORGANIZATION for the sender's organization, a send is refused at once
 * rather than queued behind the others (one tenant's slow Graph calls cannot take every place);
 * `drained` succeeds once none is in flight.
 */
export const makeInFlightGate = <Outcome>(
  limits: { readonly total: number; readonly perOrganization: number },
  ended: (outcome: Outcome) => void
): InFlightGate<Outcome> => {
  let inFlight = 0
  const inFlightOf = new Map<string, number>()
  let waiting: Array<() => void> = []
  const run = async (organizationId: string, send: () => Promise<Outcome>) => {
    inFlight++
    inFlightOf.set(organizationId, (inFlightOf.get(organizationId) ?? 0) + 1)
    try {
      const outcome = await send()
      ended(outcome)
      return outcome
    } finally {
      inFlight--
      const left = (inFlightOf.get(organizationId) ?? 1) - 1
      if (left > 0) inFlightOf.set(organizationId, left)
      else inFlightOf.delete(organizationId)
      if (inFlight === 0) {
        const woken = waiting
        waiting = []
        for (const wake of woken) wake()
      }
    }
  }
  const drained = Effect.suspend(() =>
    inFlight === 0 ? Effect.void : Effect.zipRight(
      Effect.logInfo("Waiting for the sends in flight to end before stopping").pipe(Effect.annotateLogs({ inFlight })),
      Effect.async<void>((resume) => {
        if (inFlight === 0) return resume(Effect.void)
        waiting.push(() => resume(Effect.void))
      })
    )
  )
  const overloaded = (organizationId: string): ServiceUnavailable | undefined => {
    if (inFlight >= limits.total) {
      return new ServiceUnavailable({
        message: `The hub is overloaded: ${inFlight} sends are in flight; retry shortly`,
        error: "overloaded",
        retryAfterSeconds: 1
      })
    }
    const own = inFlightOf.get(organizationId) ?? 0
    return own < limits.perOrganization ? undefined : new ServiceUnavailable({
      message:
        `This organization has ${own} sends in flight, as many as it may (HUB_SEND_MAX_IN_FLIGHT_PER_ORGANIZATION); retry shortly`,
      error: "overloaded",
      retryAfterSeconds: 1
    })
  }
  return { run, drained, overloaded, inFlight: () => inFlight }
}
