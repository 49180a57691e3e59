/** Instances of the caller's organization (organization or session tokens). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Auth/Middleware.js"
import { IsoTimestamp } from "../Domain/Schemas.js"

export const InstanceRecord = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  phone_number_id: Schema.String,
  waba_id: Schema.String,
  send_rate: Schema.Number.annotations({ description: "Messages per second the hub sends from this number at most (HUB_SEND_RATE)" }),
  created_at: IsoTimestamp
})

export class InstancesApi extends HttpApiGroup.make("instances")
  .add(HttpApiEndpoint.get("list", "/api/instances").addSuccess(Schema.Struct({ data: Schema.Array(InstanceRecord) })))
  .middleware(Authentication)
{}
