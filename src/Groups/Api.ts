/** Groups of the instance's phone number (instance tokens), with the upstream fields renamed as the spec names them. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GroupId } from "./GroupId.js"

const Group = Schema.Struct({
  id: Schema.String.annotations({ description: "The group id as the upstream gives it" }),
  subject: Schema.String,
  description: Schema.String,
  creation_time: Schema.Int.annotations({ description: "Unix seconds" }),
  participants_count: Schema.Int
})

export class GroupsApi extends HttpApiGroup.make("groups")
  .annotate(OpenApi.Description, "Groups of the instance's phone number.")
  .add(
    HttpApiEndpoint.get("get", "/groups/:groupId")
      .setPath(Schema.Struct({ groupId: GroupId }))
      .addSuccess(Group)
      .pipe(
        accepts(instanceOnly),
        documented(
          "Read a group",
          "A group of the instance's phone number: subject, description, creation time and participant count."
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}
