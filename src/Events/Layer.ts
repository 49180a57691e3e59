/** The events services: ingress with its stores, webhooks, the URL policy, the dispatcher's wake-up signal and hand-off, and retention. */
import { Layer } from "effect"
import { MessagesRepoLive } from "../Messages/Repo.js"
import { WebhooksRepoLive } from "../Webhooks/Repo.js"
import { UrlPolicyLive } from "../Webhooks/UrlPolicy.js"
import { DispatchSignalLive } from "./DispatchSignal.js"
import { HandoffLive } from "./Handoff.js"
import { IngressLive } from "./Ingress.js"
import { OutboxRepoLive } from "./Outbox.js"
import { RetentionLive } from "./Retention.js"
import { UnroutedRepoLive } from "./Unrouted.js"

export const EventsServicesLive = Layer.mergeAll(IngressLive, RetentionLive, UnroutedRepoLive).pipe(
  Layer.provideMerge(Layer.mergeAll(OutboxRepoLive, WebhooksRepoLive, UrlPolicyLive, DispatchSignalLive, HandoffLive, MessagesRepoLive))
)

export { DispatcherLive } from "./Dispatcher.js"
export { RetentionScheduleLive } from "./Retention.js"
export { SandboxEventsLive } from "./SandboxFeed.js"
