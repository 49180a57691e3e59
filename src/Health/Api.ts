/** Liveness and readiness probes; no authentication. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"

export class HealthApi extends HttpApiGroup.make("health")
  .annotate(OpenApi.Description, "Liveness and readiness probes; no token.")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .pipe(documented("Liveness", "200 while the process serves requests."))
  )
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready"), database: Schema.Literal("ok") }))
      .addError(Wire.ServiceUnavailable)
      .pipe(documented(
        "Readiness",
        "200 when the database answers and takes writes; 503 otherwise (not_ready, storage_unavailable, or draining while stopping)."
      ))
  )
{}
