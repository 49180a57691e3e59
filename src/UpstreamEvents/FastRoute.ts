/**
 * POST /upstream/events, its one handler: Bun routes the request here (Edge/FastLane.ts), and HubApi's
 * declaration hands its requests here too (Domain/PlainRoute.ts `servedByHotRoute`). The signature is
 * checked on the exact bytes before anything is parsed or stored; the post joins the ingress's next
 * group and is answered once that group has committed; every refusal and failure is rendered by the edge.
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Exit, Option, Redacted, type Tracer } from "effect"
import { HubConfig } from "../Config.js"
import { BadRequest, type PayloadTooLarge, ServiceUnavailable, Unauthorized } from "../Domain/Errors.js"
import { parseJsonObject } from "../Domain/Json.js"
import type { PlainResponder, PlainRoute } from "../Domain/PlainRoute.js"
import { BodyTooLarge, declaredLength, readBodyAtMost } from "../Net/BodyLimit.js"
import { annotate, endSpan, HubTracer, startSpan, traceparentOf } from "../Tracing/Spans.js"
import { MAX_UPSTREAM_BODY, upstreamBodyTooLarge } from "./Api.js"
import type { Envelope } from "./Envelope.js"
import { verifyHubSignature } from "./HubSignature.js"
import { type IngestAnswer, Ingress, summaryOf } from "./Ingress.js"

/** What an aborted post is answered (no one is there to read it; the edge logs it as any answer). */
const abortedAnswer = HttpServerResponse.unsafeJson(
  { statusCode: 400, message: "The upstream post was aborted before its body arrived", error: "aborted" },
  { status: 400 }
)

const utf8 = new TextDecoder()

const notAnObject = new BadRequest({
  message: "Malformed request body: it is not a JSON object",
  error: "malformed_body"
})

/** The checks of a post, in their order: its size, its signature, its JSON, then the envelope's shape. */
const makeUpstreamPostCheck = Effect.gen(function*() {
  const config = yield* HubConfig
  const ingress = yield* Ingress
  const appSecret = Option.map(config.appSecret, Redacted.value)
  const tracer = yield* HubTracer
  return {
    /** Whether the declared size alone refuses the post, before its body is read. */
    declaredTooLarge: (contentLength: string | undefined) => Number(contentLength ?? 0) > MAX_UPSTREAM_BODY,
    tooLarge: upstreamBodyTooLarge,
    /** The post's envelope, or why it is refused: size, signature, JSON, then the envelope's shape. */
    check: (
      body: Uint8Array,
      signature: string | undefined,
      span: Tracer.Span | undefined
    ): Either.Either<Envelope, PayloadTooLarge | Unauthorized | BadRequest> => {
      if (body.byteLength > MAX_UPSTREAM_BODY) return Either.left(upstreamBodyTooLarge)
      if (Option.isSome(appSecret)) {
        const verifying = tracer === undefined
          ? undefined
          : startSpan(tracer, "UpstreamEvents.signature", span, "internal")
        const verified = verifyHubSignature(appSecret.value, body, signature)
        if (verifying !== undefined) {
          endSpan(verifying, verified ? undefined : "X-Hub-Signature-256 does not match the body")
        }
        if (!verified) return Either.left(new Unauthorized())
      }
      const payload = parseJsonObject(utf8.decode(body))
      if (payload === undefined) return Either.left(notAnObject)
      return ingress.check(payload)
    }
  }
})

/**
 * The post's commit as a span: from joining a group to that group's commit. Its events keep its
 * `traceparent`, so every attempt to deliver them, on any replica, is its child (Delivery/Attempt.ts).
 */
const tracedSubmit = (
  tracer: Tracer.Tracer,
  ingress: Ingress,
  envelope: Envelope,
  parent: Tracer.Span | undefined
) => {
  const span = startSpan(tracer, "UpstreamEvents.commit", parent, "internal", {
    "hub.changes": envelope.changes.length,
    "hub.phone_number_ids": [...new Set(envelope.changes.flatMap((c) => c.phoneNumberId ?? []))]
  })
  return new Promise<Exit.Exit<IngestAnswer>>((resolve) =>
    ingress.submit(envelope, (outcome) => {
      if (Exit.isSuccess(outcome)) {
        const answer = outcome.value
        annotate(span, {
          "hub.event_ids": answer.events.map((e) => e.id),
          "hub.instance_ids": [...new Set(answer.events.map((e) => e.instanceId))],
          "hub.accepted": answer.accepted,
          "hub.duplicates": answer.duplicates,
          "hub.unrouted": answer.unrouted,
          "hub.deliveries": answer.deliveries
        })
      }
      endSpan(span, Exit.isSuccess(outcome) ? undefined : "the group's transaction did not commit")
      resolve(outcome)
    }, traceparentOf(span))
  )
}

export const makeUpstreamPostPlainRoute = Effect.gen(function*() {
  const post = yield* makeUpstreamPostCheck
  const ingress = yield* Ingress
  const tracer = yield* HubTracer
  const handle = async (request: Request, edge: PlainResponder): Promise<Response> => {
    if (post.declaredTooLarge(request.headers.get("content-length") ?? undefined)) {
      return edge.fail(Cause.fail(post.tooLarge))
    }
    // Refused before the body is read, and again just before it joins a group (other posts were read meanwhile).
    const busy = ingress.overloaded()
    if (busy !== undefined) return edge.fail(Cause.fail(busy))
    const release = ingress.holdUnverified(declaredLength(request.headers.get("content-length")))
    if (release instanceof ServiceUnavailable) return edge.fail(Cause.fail(release))
    let envelope: ReturnType<typeof post.check>
    try {
      const body = await readBodyAtMost(request, MAX_UPSTREAM_BODY)
      if (body instanceof BodyTooLarge) return edge.fail(Cause.fail(post.tooLarge))
      envelope = post.check(body, request.headers.get("x-hub-signature-256") ?? undefined, edge.span)
    } catch (error) {
      // The poster went away mid-body: nothing was stored, and the upstream sends it again.
      return edge.run(
        Effect.as(
          Effect.logWarning("An upstream post was aborted before its body arrived", String(error)),
          abortedAnswer
        )
      )
    } finally {
      release()
    }
    if (Either.isLeft(envelope)) return edge.fail(Cause.fail(envelope.left))
    const stillBusy = ingress.overloaded()
    if (stillBusy !== undefined) return edge.fail(Cause.fail(stillBusy))
    const outcome = await (tracer === undefined
      ? new Promise<Exit.Exit<IngestAnswer>>((resolve) => ingress.submit(envelope.right, resolve))
      : tracedSubmit(tracer, ingress, envelope.right, edge.span))
    if (Exit.isFailure(outcome)) return edge.fail(outcome.cause)
    const answer = outcome.value
    return answer.unrouted > 0
      ? edge.json(summaryOf(answer), ingress.warnUnrouted(answer))
      : edge.json(summaryOf(answer))
  }
  return { route: "POST /upstream/events", handle } satisfies PlainRoute
})
