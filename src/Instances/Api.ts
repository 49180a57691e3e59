/** Instances of the caller's organization (organization or session tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, management } from "../Domain/Access.js"
import { documented } from "../Domain/Documented.js"
import { Authentication } from "../Domain/Authentication.js"
import { IsoTimestamp } from "../Domain/Schemas.js"

export const InstanceRecord = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  phone_number_id: Schema.String,
  waba_id: Schema.String,
  send_rate: Schema.Number.annotations({ description: "Messages per second the hub sends from this number at most (HUB_SEND_RATE)" }),
  marketing_messages: Schema.Literal("auto", "off").annotations({
    description: "auto: a MARKETING template send goes to the Marketing Messages API (/marketing_messages); off: every send to " +
      "/messages. Set with hub instance create|update --marketing-messages; a send's `via` overrides it"
  }),
  created_at: IsoTimestamp
})

export class InstancesApi extends HttpApiGroup.make("instances")
  .annotate(OpenApi.Description, "Instances of the organization: each is bound to one business phone number and business account.")
  .add(
    HttpApiEndpoint.get("list", "/api/instances")
      .addSuccess(Schema.Struct({ data: Schema.Array(InstanceRecord) }))
      .pipe(accepts(management), documented("List instances", "The organization's instances: each one's id, phone number id and business account id."))
  )
  .middleware(Authentication)
{}
