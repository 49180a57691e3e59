/** Instances of the caller's organization (organization or session tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, management } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { IsoTimestamp } from "../Domain/Schemas.js"
import type { InstanceRow } from "./Repo.js"

export const InstanceRecord = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  phone_number_id: Schema.String,
  waba_id: Schema.String,
  send_rate: Schema.Number.annotations({
    description:
      "Messages per second the hub sends from this number at most: its throughput level as Meta last said (80 standard, 1,000 high, 20 for a number also on the Business app), under HUB_SEND_RATE when set"
  }),
  marketing_messages: Schema.Literal("auto", "off").annotations({
    description:
      "auto: a MARKETING template send goes to the Marketing Messages API (/marketing_messages); off: every send to " +
      "/messages. Set with hub instance create|update --marketing-messages; a send's `via` overrides it"
  }),
  created_at: IsoTimestamp
})

/** An instance as the API shows it; `sendRate` is its number's (PhoneNumbers/Throughput.ts sendRateOf). */
export const instanceRecord = (row: InstanceRow, sendRate: number): typeof InstanceRecord.Type => ({
  id: row.id,
  name: row.name,
  phone_number_id: row.phone_number_id,
  waba_id: row.waba_id,
  send_rate: sendRate,
  marketing_messages: row.marketing_messages,
  created_at: row.created_at
})

export class InstancesApi extends HttpApiGroup.make("instances")
  .annotate(
    OpenApi.Description,
    "Instances of the organization: each is bound to one business phone number and business account."
  )
  .add(
    HttpApiEndpoint.get("list", "/api/instances")
      .addSuccess(Schema.Struct({ data: Schema.Array(InstanceRecord) }))
      .pipe(
        accepts(management),
        documented(
          "List instances",
          "The organization's instances: each one's id, phone number id and business account id."
        )
      )
  )
  .middleware(Authentication)
{}
