/** The ingress's services: the ingress itself (upstream posts to outbox rows) and the unrouted store, over the delivery engine's. */
import { Layer } from "effect"
import { DeliveryServicesLive } from "../Delivery/Layer.js"
import { MessagesRepoLive } from "../Messages/Repo.js"
import { IngressLive } from "./Ingress.js"
import { UnroutedRepoLive } from "./Unrouted.js"

export const IngressServicesLive = Layer.mergeAll(IngressLive, UnroutedRepoLive).pipe(
  Layer.provideMerge(Layer.mergeAll(DeliveryServicesLive, MessagesRepoLive))
)
