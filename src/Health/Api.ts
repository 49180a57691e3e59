/** Liveness and readiness probes; no authentication. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { ServiceUnavailable } from "../Domain/Errors.js"

export class HealthApi extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Schema.Struct({ status: Schema.Literal("ok") })))
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready"), database: Schema.Literal("ok") }))
      .addError(ServiceUnavailable)
  )
{}
