/**
 * Where the sandbox sends the webhook payloads the real upstream would post to the hub
 * (status events after a send). The ingress provides the layer that feeds them
 * through the hub's ingress; until then they are dropped.
 */
import { Context, type Effect } from "effect"
import type { JsonObject } from "../Domain/Json.js"

export class SandboxEvents extends Context.Tag("SandboxEvents")<SandboxEvents, {
  /** One full upstream webhook payload (`{object, entry[]}`). Must not fail; errors are the receiver's to log. */
  readonly emit: (payload: JsonObject) => Effect.Effect<void>
}>() {}
