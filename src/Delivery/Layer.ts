/** The delivery engine's services: the outbox and the enqueue over it, the dispatcher's wake-up signal and hand-off, the URL policy, the delivery watch, and retention. */
import { Layer } from "effect"
import { UrlPolicyLive } from "../Net/UrlPolicy.js"
import { DeliveryWatch } from "./DeliveryWatch.js"
import { DispatchSignal } from "./DispatchSignal.js"
import { Enqueue } from "./Enqueue.js"
import { Handoff } from "./Handoff.js"
import { OutboxRepo } from "./Outbox.js"
import { Retention } from "./Retention.js"

export const DeliveryServicesLive = Layer.mergeAll(
  OutboxRepo.Default,
  Enqueue.Default,
  DispatchSignal.Default,
  Handoff.Default,
  Retention.Default,
  UrlPolicyLive,
  DeliveryWatch.Default
)
