/** HubApi: every endpoint group of the hub, composed. */
import { HttpApi, OpenApi } from "@effect/platform"
import { AuthApi } from "./Auth/Api.js"
import { BadRequest } from "./Domain/Errors.js"
import { HealthApi } from "./Health/Api.js"
import { InstancesApi } from "./Instances/Api.js"
import { AnalyticsApi } from "./Analytics/Api.js"
import { BusinessProfileApi } from "./BusinessProfile/Api.js"
import { CallsApi } from "./Calls/Api.js"
import { FlowsApi } from "./Flows/Api.js"
import { GroupsApi } from "./Groups/Api.js"
import { MediaApi } from "./Media/Api.js"
import { MessagesApi } from "./Messages/Api.js"
import { PhoneNumbersApi } from "./PhoneNumbers/Api.js"
import { QrCodesApi } from "./QrCodes/Api.js"
import { TemplatesApi } from "./Templates/Api.js"
import { SandboxApi, UpstreamEventsApi } from "./Events/Api.js"
import { WebhooksApi } from "./Webhooks/Api.js"
import { LiveEventsApi } from "./LiveEvents/Api.js"

export class HubApi extends HttpApi.make("hub")
  .add(HealthApi)
  .add(AuthApi)
  .add(InstancesApi)
  .add(MessagesApi)
  .add(MediaApi)
  .add(TemplatesApi)
  .add(PhoneNumbersApi)
  .add(CallsApi)
  .add(AnalyticsApi)
  .add(QrCodesApi)
  .add(FlowsApi)
  .add(GroupsApi)
  .add(BusinessProfileApi)
  .add(WebhooksApi)
  .add(UpstreamEventsApi)
  .add(SandboxApi)
  .add(LiveEventsApi)
  .addError(BadRequest)
  .annotate(OpenApi.Title, "Messaging Hub")
  .annotate(OpenApi.Description, "HTTP gateway in front of the WhatsApp Business Cloud API")
{}
