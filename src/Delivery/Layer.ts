/** The delivery engine's services: the outbox and the enqueue over it, the dispatcher's wake-up signal and hand-off, the URL policy, the delivery watch, and retention. */
import { Layer } from "effect"
import { UrlPolicyLive } from "../Net/UrlPolicy.js"
import { DeliveryWatchLive } from "./DeliveryWatch.js"
import { DispatchSignalLive } from "./DispatchSignal.js"
import { Enqueue } from "./Enqueue.js"
import { HandoffLive } from "./Handoff.js"
import { OutboxRepoLive } from "./Outbox.js"
import { RetentionLive } from "./Retention.js"

export const DeliveryServicesLive = Layer.mergeAll(OutboxRepoLive, Enqueue.Default, DispatchSignalLive, HandoffLive, RetentionLive, UrlPolicyLive, DeliveryWatchLive)
