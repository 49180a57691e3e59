/**
 * A broadcast's business steps: its recipients become bulk queued sends of its template (one per person,
 * the opted-out skipped), written with the broadcast's rows in one transaction (SendQueue/QueuedSends.ts
 * `enqueueMany`); its status and counts are read from its sends' records.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Schema } from "effect"
import { BadRequest, Conflict, NotFound } from "../Domain/Errors.js"
import { newId, nowIso } from "../Domain/Ids.js"
import type { InstanceRef, Principal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { SendMessageRequest } from "../Messages/MessageSchemas.js"
import { optedOutAmong } from "../Messages/OptOuts.js"
import { SendCancellation } from "../SendQueue/Cancel.js"
import { QueuedSends } from "../SendQueue/QueuedSends.js"
import { TemplateApproval } from "../Templates/Approval.js"
import {
  type BroadcastQuery,
  type BroadcastRecord,
  type MoreRecipients,
  NewBroadcast,
  type RecipientQuery,
  RECIPIENTS_PER_BROADCAST
} from "./Api.js"
import { type BroadcastRow, BroadcastsRepo, type NewRecipient, type TallyEntry } from "./Repo.js"

type Recipient = (typeof MoreRecipients.Type)["recipients"][number]
type Template = (typeof NewBroadcast.Type)["template"]

const decodeSend = Schema.decodeUnknown(SendMessageRequest)
const decodeTemplate = Schema.decodeUnknownSync(Schema.parseJson(NewBroadcast.fields.template))

const notFound = (id: string) => new NotFound({ message: `Broadcast ${id} not found`, error: "not_found" })

/** Whether the principal may see the broadcast: its organization's; an instance token, its instance's. */
const visibleTo = (principal: Principal, row: BroadcastRow) =>
  row.organization_id === principal.organizationId &&
  (principal.instance === undefined || principal.instance.id === row.instance_id)

/** The person a recipient names, as the queue keys them (a number without its +). */
const partyOf = (recipient: Recipient) => recipient.to?.replace(/^\+/, "") ?? recipient.recipient ?? ""

/** The broadcast's record: its status and its recipients by status and by failure reason. */
const broadcastRecord = (
  row: BroadcastRow,
  tally: ReadonlyArray<TallyEntry>,
  now: number
): typeof BroadcastRecord.Type => {
  const counts = { recipients: 0, pending: 0, sent: 0, delivered: 0, read: 0, failed: 0, skipped: 0 }
  const failures: Record<string, number> = {}
  let queuedSends = 0
  for (const entry of tally) {
    queuedSends += entry.queued
    counts.recipients += entry.n
    counts[entry.status] += entry.n
    if (entry.reason !== null) failures[entry.reason] = (failures[entry.reason] ?? 0) + entry.n
  }
  const scheduled = row.send_at !== null && Date.parse(row.send_at) > now
  return {
    id: row.id,
    name: row.name,
    instance_id: row.instance_id,
    status: row.cancelled_at !== null
      ? "cancelled"
      : queuedSends === 0
      ? "completed"
      : scheduled
      ? "scheduled"
      : "sending",
    template: decodeTemplate(row.template),
    send_at: row.send_at,
    validity: row.validity,
    created_at: row.created_at,
    cancelled_at: row.cancelled_at,
    counts,
    failures
  }
}

/** One bulk template send to the person, with their components when they have their own. */
const sendOf = (row: BroadcastRow, template: Template, recipient: Recipient, now: number) =>
  decodeSend({
    ...(recipient.to === undefined ? { recipient: recipient.recipient } : { to: recipient.to }),
    type: "template",
    template: { ...template, ...(recipient.components === undefined ? {} : { components: recipient.components }) },
    priority: "bulk",
    // A send_at already past is now (recipients added later go at once).
    ...(row.send_at !== null && Date.parse(row.send_at) > now
      ? { send_at: row.send_at }
      : {}),
    ...(row.validity === null ? {} : { validity: row.validity })
  }).pipe(
    Effect.mapError((e) =>
      new BadRequest({ message: `Invalid request: recipients: ${e.message}`, error: "validation_failed" })
    )
  )

/**
 * Queues the broadcast's template to the new people among `recipients` (each once; the opted out
 * skipped), with `first` (the broadcast's own row, when it is new) in the same transaction.
 */
const addTo = (
  stores: { readonly repo: BroadcastsRepo; readonly queued: QueuedSends; readonly sql: SqlClient.SqlClient },
  now: number,
  row: BroadcastRow,
  instance: InstanceRef,
  recipients: ReadonlyArray<Recipient>,
  first: Effect.Effect<void, SqlError.SqlError> = Effect.void
) =>
  Effect.gen(function*() {
    const byParty = new Map<string, Recipient>()
    for (const recipient of recipients) {
      if (!byParty.has(partyOf(recipient))) byParty.set(partyOf(recipient), recipient)
    }
    const already = yield* Effect.orDie(stores.repo.existing(row.id, [...byParty.keys()]))
    const fresh = [...byParty].filter(([party]) => !already.has(party))
    const held = yield* Effect.orDie(stores.repo.recipientCount(row.id))
    if (held + fresh.length > RECIPIENTS_PER_BROADCAST) {
      return yield* new BadRequest({
        message: `Invalid request: recipients: a broadcast holds at most ${RECIPIENTS_PER_BROADCAST} recipients ` +
          `(it holds ${held}; ${fresh.length} are new)`,
        error: "validation_failed",
        details: [{
          field: "recipients",
          message: `a broadcast holds at most ${RECIPIENTS_PER_BROADCAST} recipients`
        }]
      })
    }
    const optedOut = yield* Effect.orDie(optedOutAmong(stores.sql, instance.wabaId, fresh.map(([party]) => party)))
    const toSend = fresh.filter(([party]) => !optedOut.has(party))
    const template = decodeTemplate(row.template)
    const requests = yield* Effect.forEach(toSend, ([, recipient]) => sendOf(row, template, recipient, now))
    yield* stores.queued.enqueueMany(instance, requests, (answers) =>
      Effect.zipRight(
        first,
        stores.repo.insertRecipients(row.id, [
          ...toSend.map(([party], i): NewRecipient => ({
            party,
            messageId: answers[i]?.id ?? null,
            skippedReason: null
          })),
          ...fresh.filter(([party]) => optedOut.has(party)).map(([party]): NewRecipient => ({
            party,
            messageId: null,
            skippedReason: "opted_out"
          }))
        ])
      ))
    return {
      added: toSend.length,
      skipped: fresh.length - toSend.length,
      duplicates: recipients.length - fresh.length,
      recipients: held + fresh.length
    }
  })

/** A page of the broadcast's recipients as added, with their send's status (`status` filters). */
const recipientPage = (repo: BroadcastsRepo, id: string, query: typeof RecipientQuery.Type) =>
  Effect.map(
    Effect.orDie(repo.recipients({
      broadcastId: id,
      status: query.status,
      after: query.after === undefined ? 0 : Number(query.after),
      limit: query.limit + 1
    })),
    (rows) => {
      const page = rows.slice(0, query.limit)
      return {
        data: page.map((r) => ({
          to: r.party,
          message_id: r.message_id,
          status: r.status,
          failure_reason: r.reason
        })),
        next: rows.length > query.limit ? String(page[page.length - 1]?.seq ?? 0) : null
      }
    }
  )

export class Broadcasts extends Effect.Service<Broadcasts>()("Broadcasts", {
  effect: Effect.gen(function*() {
    const repo = yield* BroadcastsRepo
    const queued = yield* QueuedSends
    const access = yield* InstanceAccess
    const approval = yield* TemplateApproval
    const cancellation = yield* SendCancellation
    const sql = yield* SqlClient.SqlClient
    const clock = yield* Effect.clock

    /** The broadcast's record: its status and its recipients by status and by failure reason. */
    const recordOf = (row: BroadcastRow) =>
      Effect.map(
        Effect.orDie(repo.tally(row.id)),
        (tally) => broadcastRecord(row, tally, clock.unsafeCurrentTimeMillis())
      )

    const visible = (principal: Principal, id: string) =>
      Effect.flatMap(
        Effect.orDie(repo.find(id)),
        (row) => row === undefined || !visibleTo(principal, row) ? Effect.fail(notFound(id)) : Effect.succeed(row)
      )

    const create = (principal: Principal, input: typeof NewBroadcast.Type) =>
      Effect.gen(function*() {
        const instance = yield* access.resolve(principal, {
          instanceId: input.instance_id,
          phoneNumberId: input.phone_number_id
        })
        // One look at the template now, rather than as many refused sends as it has recipients.
        const target = yield* access.target(instance)
        yield* approval.check(target, { name: input.template.name, language: input.template.language.code })
        const row: BroadcastRow = {
          id: newId("bc"),
          organization_id: instance.organizationId,
          instance_id: instance.id,
          name: input.name,
          template: JSON.stringify(input.template),
          send_at: input.send_at === undefined ? null : new Date(input.send_at).toISOString(),
          validity: input.validity ?? null,
          created_at: nowIso(),
          cancelled_at: null
        }
        yield* addTo(
          { repo, queued, sql },
          clock.unsafeCurrentTimeMillis(),
          row,
          instance,
          input.recipients,
          repo.insert(row)
        )
        return yield* recordOf(row)
      })

    const addRecipients = (principal: Principal, id: string, recipients: ReadonlyArray<Recipient>) =>
      Effect.gen(function*() {
        const row = yield* visible(principal, id)
        if (row.cancelled_at !== null) {
          return yield* new Conflict({
            message: `Broadcast ${id} is cancelled; it takes no recipients`,
            error: "cancelled"
          })
        }
        const instance = yield* access.resolve(principal, { instanceId: row.instance_id, phoneNumberId: undefined })
        return yield* addTo({ repo, queued, sql }, clock.unsafeCurrentTimeMillis(), row, instance, recipients)
      })

    const list = (principal: Principal, query: typeof BroadcastQuery.Type) =>
      Effect.gen(function*() {
        const rows = yield* Effect.orDie(repo.list({
          organizationId: principal.organizationId,
          instanceId: principal.instance?.id,
          after: query.after,
          limit: query.limit + 1
        }))
        const page = rows.slice(0, query.limit)
        return {
          data: yield* Effect.forEach(page, recordOf),
          next: rows.length > query.limit ? page[page.length - 1]?.id ?? null : null
        }
      })

    const cancel = (principal: Principal, id: string) =>
      Effect.gen(function*() {
        yield* visible(principal, id)
        // Marked first, so no recipient is added meanwhile; sends under way go on and stay.
        yield* cancellation.cancelAll(yield* Effect.orDie(repo.cancel(id)))
        return yield* recordOf(yield* visible(principal, id))
      })

    return {
      create,
      addRecipients,
      list,
      get: (principal: Principal, id: string) => Effect.flatMap(visible(principal, id), recordOf),
      recipients: (principal: Principal, id: string, query: typeof RecipientQuery.Type) =>
        Effect.zipRight(visible(principal, id), recipientPage(repo, id, query)),
      cancel
    } as const
  }),
  dependencies: [BroadcastsRepo.Default, InstanceAccess.Default, TemplateApproval.Default, SendCancellation.Default]
}) {}
