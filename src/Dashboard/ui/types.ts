/**
 * The records the dashboard reads, typed by the server's own schemas (type-only imports: nothing of
 * the server reaches the bundle). The hub encodes its answers with these schemas; the dashboard
 * trusts them rather than decoding again.
 */
import type { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { ApiTokenCreated, ApiTokenList, ApiTokenSummary, WhoAmI as WhoAmISchema } from "../../ApiTokens/Api.js"
import type { BroadcastRecord, BroadcastsApi, NewBroadcast as NewBroadcastSchema } from "../../Broadcasts/Api.js"
import type { Cursors } from "../../Domain/Paging.js"
import type { InstanceRecord } from "../../Instances/Api.js"
import type { MessageList, MessageRecord } from "../../Messages/Api.js"
import type { PollAnswer as PollAnswerSchema } from "../../Poll/Api.js"
import type { Replay } from "../../Replays/Api.js"
import type { ChangesAccepted, InboundAccepted } from "../../Sandbox/Api.js"
import type { SendQueueApi } from "../../SendQueue/Api.js"
import type { Timeseries as TimeseriesSchema } from "../../Stats/Api.js"
import type { Template as TemplateSchema } from "../../Templates/Api.js"
import type {
  Attempt,
  Delivery,
  DeliveryList,
  Recovered,
  SecretRotated,
  WebhookCreated,
  WebhookRecord
} from "../../Webhooks/Api.js"

export type TokenSummary = typeof ApiTokenSummary.Type
export type TokenList = typeof ApiTokenList.Type
export type TokenCreated = typeof ApiTokenCreated.Type
export type Instance = typeof InstanceRecord.Type
export type Message = typeof MessageRecord.Type
export type Messages = typeof MessageList.Type
export type Webhook = typeof WebhookRecord.Type
export type WebhookWithSecret = typeof WebhookCreated.Type
export type DisabledReason = NonNullable<Webhook["disabled_reason"]>
export type Rotated = typeof SecretRotated.Type
export type WebhookDelivery = typeof Delivery.Type
export type DeliveryAttempt = typeof Attempt.Type
export type Deliveries = typeof DeliveryList.Type
export type RecoverOutcome = typeof Recovered.Type
export type ReplayRecord = typeof Replay.Type
export type PollAnswer = typeof PollAnswerSchema.Type
export type PageCursors = typeof Cursors.Type
export type Inbound = typeof InboundAccepted.Type
export type ChangesSimulated = typeof ChangesAccepted.Type

/** What an endpoint of a group answers, by the endpoint's name (for the answers whose schemas the server does not export). */
type Answer<Group, Name extends string> = HttpApiEndpoint.HttpApiEndpoint.SuccessWithName<
  HttpApiGroup.HttpApiGroup.Endpoints<Group>,
  Name
>

export type Broadcast = typeof BroadcastRecord.Type
export type BroadcastCounts = Broadcast["counts"]
export type NewBroadcast = typeof NewBroadcastSchema.Encoded
export type BroadcastRecipient = NewBroadcast["recipients"][number]
export type Broadcasts = Answer<typeof BroadcastsApi, "list">
export type RecipientsAdded = Answer<typeof BroadcastsApi, "addRecipients">
export type RecipientPage = Answer<typeof BroadcastsApi, "recipients">
export type SendQueues = Answer<typeof SendQueueApi, "list">
export type TemplateRecord = typeof TemplateSchema.Type
export type Timeseries = typeof TimeseriesSchema.Type
export type MinuteBucket = Timeseries["minutes"][number]

export type WhoAmI = typeof WhoAmISchema.Type

/** What a token may do: its kind, as GET /api/auth/whoami tells it at sign-in. */
export type TokenKind = WhoAmI["kind"]
