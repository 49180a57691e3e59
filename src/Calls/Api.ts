/**
 * Calls: pre-accept an incoming call (instance tokens); the hub adds messaging_product and action.
 * The upstream keys a pre-accept by its call id: without `call_id`, the hub takes the newest call
 * from `to` still ringing, as its `calls` webhooks told (409 `no_ringing_call` when there is none).
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Domain/Authentication.js"
import { Conflict, Forbidden, NotFound, TooManyRequests, UpstreamFailure } from "../Domain/Errors.js"
import { RequestStruct } from "../Domain/Schemas.js"

export const PreAccept = RequestStruct({
  to: Schema.String.pipe(Schema.pattern(/^\d{6,15}$/, {
    message: () => "must be the caller's number in wa_id form: country code and number, digits only, no +"
  })),
  call_id: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._=+/-]{1,200}$/, { message: () => "must be the upstream call id (wacid.…)" }))
  ).annotations({ description: "The call's id from its connect webhook; when absent, the newest call from `to` still ringing" }),
  // exact: absent or an object, so a failure inside it is reported once, at its own field.
  session: Schema.optionalWith(RequestStruct({
    sdp_type: Schema.Literal("answer", "offer").annotations({ message: () => ({ message: "must be answer or offer", override: true }) }),
    sdp: Schema.String.pipe(Schema.nonEmptyString({ message: () => "must be the SDP text" }), Schema.maxLength(64 * 1024))
  }), { exact: true })
})

export class CallsApi extends HttpApiGroup.make("calls")
  .add(
    HttpApiEndpoint.post("preAccept", "/api/calls/pre-accept")
      .setPayload(PreAccept)
      .addSuccess(Schema.Struct({ success: Schema.Boolean }))
      .addError(Conflict)
  )
  .addError(Forbidden)
  .addError(NotFound)
  .addError(TooManyRequests)
  .addError(UpstreamFailure)
  .middleware(Authentication)
{}
