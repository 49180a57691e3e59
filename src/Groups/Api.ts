/** Groups of the instance's phone number (instance tokens), with the upstream fields renamed as the spec names them. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Domain/Authentication.js"
import { Forbidden, NotFound, TooManyRequests, UpstreamFailure } from "../Domain/Errors.js"
import { GroupId } from "./GroupId.js"

export const Group = Schema.Struct({
  id: Schema.String.annotations({ description: "The group id as the upstream gives it" }),
  subject: Schema.String,
  description: Schema.String,
  creation_time: Schema.Int.annotations({ description: "Unix seconds" }),
  participants_count: Schema.Int
})

export class GroupsApi extends HttpApiGroup.make("groups")
  .add(HttpApiEndpoint.get("get", "/groups/:groupId").setPath(Schema.Struct({ groupId: GroupId })).addSuccess(Group))
  .addError(Forbidden)
  .addError(NotFound)
  .addError(TooManyRequests)
  .addError(UpstreamFailure)
  .middleware(Authentication)
{}
