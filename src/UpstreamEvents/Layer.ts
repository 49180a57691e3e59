/** The ingress's services: the ingress itself (upstream posts to outbox rows) and the unrouted store, over the delivery engine's. */
import { Layer } from "effect"
import { DeliveryServicesLive } from "../Delivery/Layer.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Ingress } from "./Ingress.js"
import { UnroutedRepoLive } from "./Unrouted.js"

export const IngressServicesLive = Layer.mergeAll(Ingress.Default, UnroutedRepoLive).pipe(
  Layer.provideMerge(Layer.mergeAll(DeliveryServicesLive, MessagesRepo.Default))
)
