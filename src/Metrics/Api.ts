/**
 * GET /metrics: the hub's metrics in Prometheus' text format, for an operator's scraper. Not an api
 * token's business: HUB_METRICS_TOKEN, when set, is the one Bearer token it takes.
 */
import {
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "@effect/platform"
import { operatorCredential } from "../Domain/Access.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"

/** The scraper's credential: HUB_METRICS_TOKEN as a Bearer token, when the hub sets one. */
export class MetricsAuthorization extends HttpApiMiddleware.Tag<MetricsAuthorization>()("MetricsAuthorization", {
  failure: Wire.Unauthorized.annotations({
    description:
      "HUB_METRICS_TOKEN is set and the request does not carry it as its Bearer token (the body is exactly " +
      "{statusCode: 401, message: \"Unauthorized\"})"
  }),
  security: {
    metricsToken: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "HUB_METRICS_TOKEN, the operator's scrape token; needed only when the hub sets it"
      )
    )
  }
}) {}

const Exposition = HttpApiSchema.Text({ contentType: "text/plain" }).annotations({
  description:
    "Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`): each metric's HELP and TYPE lines, then " +
    "its samples. The hub's metrics are named hub_*; the process's (memory, CPU, event loop lag) process_* and nodejs_*."
})

export class MetricsApi extends HttpApiGroup.make("metrics")
  .annotate(OpenApi.Description, "The hub's metrics for Prometheus.")
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(Exposition)
      .addError(
        Wire.NotFound.annotations({ description: "The hub keeps no metrics: HUB_METRICS=false (metrics_disabled)" })
      )
      .pipe(
        operatorCredential(
          "Takes no api token: when the hub sets HUB_METRICS_TOKEN, it needs that token as `Authorization: Bearer <token>` " +
            "(401 otherwise); when it does not, it is open."
        ),
        documented(
          "Metrics",
          "Requests by route, status and duration; sends by result; Graph calls by call, outcome and latency; upstream posts, " +
            "changes, duplicates and unrouted changes; the outbox by state and the age of its oldest due delivery; delivery " +
            "attempts by outcome and latency; webhooks disabled; commit latency; process memory. 404 when the hub keeps no " +
            "metrics (HUB_METRICS=false)."
        )
      )
  )
  .middleware(MetricsAuthorization)
{}
