/** The delivery engine's services: the outbox, the dispatcher's wake-up signal and hand-off, the URL policy, and retention. */
import { Layer } from "effect"
import { UrlPolicyLive } from "../Net/UrlPolicy.js"
import { DeliveryWatchLive } from "./DeliveryWatch.js"
import { DispatchSignalLive } from "./DispatchSignal.js"
import { HandoffLive } from "./Handoff.js"
import { OutboxRepoLive } from "./Outbox.js"
import { RetentionLive } from "./Retention.js"

export const DeliveryServicesLive = Layer.mergeAll(OutboxRepoLive, DispatchSignalLive, HandoffLive, RetentionLive, UrlPolicyLive, DeliveryWatchLive)

export { DispatcherLive } from "./Dispatcher.js"
export { RetentionScheduleLive } from "./Retention.js"
