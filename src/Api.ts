/** HubApi: every endpoint group of the hub, composed. */
import { HttpApi, OpenApi } from "@effect/platform"
import { AuthApi } from "./Auth/Api.js"
import { BadRequest } from "./Domain/Errors.js"
import { HealthApi } from "./Health/Api.js"
import { InstancesApi } from "./Instances/Api.js"

export class HubApi extends HttpApi.make("hub")
  .add(HealthApi)
  .add(AuthApi)
  .add(InstancesApi)
  .addError(BadRequest)
  .annotate(OpenApi.Title, "Messaging Hub")
  .annotate(OpenApi.Description, "HTTP gateway in front of the WhatsApp Business Cloud API")
{}
