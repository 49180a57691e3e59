/**
 * Calls: pre-accept an incoming call (instance tokens); the hub adds messaging_product and action.
 * The upstream keys a pre-accept by its call id: without `call_id`, the hub takes the newest call
 * from `to` still ringing, as its `calls` webhooks told (409 `no_ringing_call` when there is none).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { ForwardedRequest, RequestStruct } from "../Domain/Schemas.js"
import { UserIdentifier } from "../Domain/UserIds.js"

const PreAccept = ForwardedRequest({
  to: UserIdentifier.annotations({
    description:
      "The caller: their number (wa_id digits) or, for a username user, their business-scoped user id (sent as `recipient`)"
  }),
  call_id: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^[A-Za-z0-9._=+/-]{1,200}$/, { message: () => "must be the upstream call id (wacid.…)" })
    )
  ).annotations({
    description: "The call's id from its connect webhook; when absent, the newest call from `to` still ringing"
  }),
  // exact: absent or an object, so a failure inside it is reported once, at its own field.
  session: Schema.optionalWith(
    RequestStruct({
      sdp_type: Schema.Literal("answer", "offer").annotations({
        message: () => ({ message: "must be answer or offer", override: true })
      }),
      sdp: Schema.String.pipe(
        Schema.nonEmptyString({ message: () => "must be the SDP text" }),
        Schema.maxLength(64 * 1024)
      )
    }),
    { exact: true }
  )
})

export class CallsApi extends HttpApiGroup.make("calls")
  .annotate(OpenApi.Description, "Incoming calls.")
  .add(
    HttpApiEndpoint.post("preAccept", "/api/calls/pre-accept")
      .setPayload(PreAccept)
      .addSuccess(Schema.Struct({ success: Schema.Boolean }))
      .addError(Wire.Conflict)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(instanceOnly),
        documented(
          "Pre-accept an incoming call",
          "Pre-accepts the call from `to` (a number, or a business-scoped user id: the ringing call is found by either) so its " +
            "media connects sooner; the hub adds `messaging_product` and `action`. " +
            "`call_id`, `session` (SDP) and any field the hub does not model are passed through to the upstream. Without `call_id` the newest call from `to` " +
            "still ringing is used, as its `calls` webhooks told; 409 `no_ringing_call` when there is none.",
          { example: { to: "16505551234", call_id: "wacid.HBgLMTY1MDU1NTEyMzQVAgASGCA4NDJB" } }
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}
