/**
 * The hand-off from the ingress to this process's dispatcher. When a new delivery overtakes nothing
 * queued and the dispatcher has room for it (Admission.ts), the ingress writes its row already
 * leased to the dispatcher, in the same transaction as the event, and hands it over once that
 * transaction has committed: the attempt starts at once, without a round to lease it and read it
 * back. Nothing is weakened: the row is durable before the upstream's 200, and if the process dies
 * first, its lease expires and any dispatcher takes it, as with a row leased by a round.
 * Without a dispatcher (a test of the ingress alone, or a dispatcher stopping) every row is queued.
 */
import { Effect, type Scope } from "effect"
import type { LeasedDelivery } from "./Records.js"

/** What the dispatcher offers the ingress while it runs. */
export interface DispatcherIntake {
  /** The lease owner to write on handed-off rows. */
  readonly owner: string
  /** How long a lease lasts (see Dispatcher.ts). */
  readonly leaseMs: number
  /** Reserves room for one attempt to this webhook of this organization, if its new row may skip the queue (Admission.admit). */
  readonly admit: (webhookId: string, organizationId: string) => boolean
  /** Starts admitted deliveries whose rows have committed. */
  readonly startCommitted: (deliveries: ReadonlyArray<LeasedDelivery>) => Effect.Effect<void>
  /** Gives back the room of admitted deliveries whose rows did not commit. */
  readonly releaseUncommitted: (deliveries: ReadonlyArray<LeasedDelivery>) => void
}

export interface HandoffShape {
  /** Offers `intake` to the ingress until the scope closes; then the one it replaced, if any, again. */
  readonly serve: (intake: DispatcherIntake) => Effect.Effect<void, never, Scope.Scope>
  /** The dispatcher's intake, if one runs. */
  readonly intake: () => DispatcherIntake | undefined
}

export class Handoff extends Effect.Service<Handoff>()("Handoff", {
  sync: (): HandoffShape => {
    let current: DispatcherIntake | undefined
    return {
      serve: (intake) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const replaced = current
            current = intake
            return replaced
          }),
          (replaced) =>
            Effect.sync(() => {
              if (current === intake) current = replaced
            })
        ),
      intake: () => current
    }
  }
}) {}
