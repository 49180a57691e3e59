/**
 * POST /upstream/events on the fast lane (see Edge/FastLane.ts), as a plain handler: the post is checked
 * as HubApi's handler checks it, submitted to the ingress's next group, and answered once that group
 * has committed; every refusal and failure is rendered by the edge.
 */
import { Cause, Effect, Either, Exit } from "effect"
import type { PlainResponder, PlainRoute } from "../Domain/PlainRoute.js"
import { BodyTooLarge, declaredLength, readBodyAtMost } from "../Net/BodyLimit.js"
import { ServiceUnavailable } from "../Domain/Errors.js"
import { HttpServerResponse } from "@effect/platform"

/** What an aborted post is answered (no one is there to read it; the edge logs it as any answer). */
const abortedAnswer = HttpServerResponse.unsafeJson(
  { statusCode: 400, message: "The upstream post was aborted before its body arrived", error: "aborted" },
  { status: 400 }
)
import { makeUpstreamPostCheck } from "./Http.js"
import { type IngestAnswer, Ingress, summaryOf } from "./Ingress.js"
import { MAX_UPSTREAM_BODY } from "./Api.js"

export const makeUpstreamPostPlainRoute = Effect.gen(function*() {
  const post = yield* makeUpstreamPostCheck
  const ingress = yield* Ingress
  const handle = async (request: Request, edge: PlainResponder): Promise<Response> => {
    if (post.declaredTooLarge(request.headers.get("content-length") ?? undefined)) return edge.fail(Cause.fail(post.tooLarge))
    // Refused before the body is read, and again just before it joins a group (other posts were read meanwhile).
    const busy = ingress.overloaded()
    if (busy !== undefined) return edge.fail(Cause.fail(busy))
    const release = ingress.holdUnverified(declaredLength(request.headers.get("content-length")))
    if (release instanceof ServiceUnavailable) return edge.fail(Cause.fail(release))
    let envelope: ReturnType<typeof post.check>
    try {
      const body = await readBodyAtMost(request, MAX_UPSTREAM_BODY)
      if (body instanceof BodyTooLarge) return edge.fail(Cause.fail(post.tooLarge))
      envelope = post.check(body, request.headers.get("x-hub-signature-256") ?? undefined)
    } catch (error) {
      // The poster went away mid-body: nothing was stored, and the upstream sends it again.
      return edge.run(Effect.as(Effect.logWarning("An upstream post was aborted before its body arrived", String(error)), abortedAnswer))
    } finally {
      release()
    }
    if (Either.isLeft(envelope)) return edge.fail(Cause.fail(envelope.left))
    const stillBusy = ingress.overloaded()
    if (stillBusy !== undefined) return edge.fail(Cause.fail(stillBusy))
    const outcome = await new Promise<Exit.Exit<IngestAnswer>>((resolve) => ingress.ingestNow(envelope.right, resolve))
    if (Exit.isFailure(outcome)) return edge.fail(outcome.cause)
    const answer = outcome.value
    return answer.unrouted > 0 ? edge.json(summaryOf(answer), ingress.warnUnrouted(answer)) : edge.json(summaryOf(answer))
  }
  return { route: "POST /upstream/events", handle } satisfies PlainRoute
})
