/**
 * Who is who. A WhatsApp user is known to a business by their number, a business-scoped user id
 * (BSUID, `US.1349…`), a parent BSUID across linked portfolios (`US.ENT.…`), and over time several of
 * each: a number change gives a new BSUID (`user_changed_number`), and Meta may renew a BSUID
 * (`user_changed_user_id`). The hub keeps every identifier it has seen paired with another, grouped
 * per organization into one person, so `GET /api/messages?user=` answers a person's whole history by
 * any of their identifiers, records written before the pair was learned included.
 *
 * Pairs come from the upstream's changes (contacts[], messages[], statuses[], calls[], echoes,
 * user_preferences[], and the two system messages) and from send answers ({input, wa_id, user_id}).
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newId, type OrganizationId } from "../Domain/Ids.js"
import { isJsonObject, type JsonObject } from "../Domain/Json.js"
import { jsonArrayRows } from "../Sql/Dialect.js"
import { powerOfTwoChunks } from "../Sql/StatementShapes.js"

/** Identifiers the upstream gave together for one user: each names the same person. */
export interface IdentityLink {
  readonly organizationId: OrganizationId
  readonly identifiers: ReadonlyArray<string>
}

/** A pair learned from an upstream change, applied in the ingress's transaction (see Messages/Repo.ts). */
export interface IdentityChange {
  readonly _tag: "Identity"
  readonly link: IdentityLink
}

/** A person's identifiers are few; a lookup stops here whatever a bad merge may have gathered. */
const MAX_IDENTIFIERS = 64

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

const linkOf = (organizationId: OrganizationId, values: ReadonlyArray<unknown>): ReadonlyArray<IdentityLink> => {
  const identifiers = [
    ...new Set(values.flatMap((value) => {
      const id = text(value)
      return id === undefined ? [] : [id]
    }))
  ]
  return identifiers.length < 2 ? [] : [{ organizationId, identifiers }]
}

/**
 * The field triples that name one user in an item of the upstream's lists: the number, the BSUID, the
 * parent BSUID. A triple of which only the number is given (the business's own `from` on an echo, its
 * `to` on an incoming call) pairs nothing.
 */
const TRIPLES: ReadonlyArray<readonly [string, string, string]> = [
  ["wa_id", "user_id", "parent_user_id"],
  ["from", "from_user_id", "from_parent_user_id"],
  ["to", "to_user_id", "to_parent_user_id"],
  ["recipient_id", "recipient_user_id", "recipient_parent_user_id"]
]

const LISTS = ["contacts", "messages", "statuses", "message_echoes", "calls", "user_preferences"]

/**
 * The pairs one change's value carries. A `user_changed_number` system message names the old number
 * (`from`), the new one (`system.wa_id`), the new BSUID and the previous one; `user_changed_user_id`
 * the new and previous BSUIDs: each is one person throughout.
 */
export const identityLinksOf = (organizationId: OrganizationId, value: JsonObject): ReadonlyArray<IdentityLink> => [
  ...LISTS.flatMap((list) => {
    const items = value[list]
    if (!Array.isArray(items)) return []
    return items.filter(isJsonObject).flatMap((item) => {
      const system = item.system
      if (item.type === "system" && isJsonObject(system)) {
        return linkOf(organizationId, [
          system.type === "user_changed_number" ? item.from : undefined,
          system.wa_id,
          system.user_id,
          system.parent_user_id,
          system.previous_user_id,
          system.previous_parent_user_id
        ])
      }
      return TRIPLES.flatMap((fields) => linkOf(organizationId, fields.map((field) => item[field])))
    })
  }),
  // A `standby` change carries its messages one level down.
  ...(isJsonObject(value.standby) ? identityLinksOf(organizationId, value.standby) : [])
]

/** A send's answer: `contacts[]` with the input, the number and the BSUID Meta resolved it to. */
export const identityLinksOfAnswer = (
  organizationId: OrganizationId,
  answer: { readonly contacts: ReadonlyArray<Readonly<Record<string, unknown>>> }
): ReadonlyArray<IdentityLink> =>
  answer.contacts.flatMap((contact) => linkOf(organizationId, [contact.wa_id, contact.user_id, contact.parent_user_id]))

interface KnownIdentity {
  readonly organization_id: string
  readonly identifier: string
  readonly person_id: string
}

const keyOf = (organizationId: string, identifier: string) => `${organizationId}\u0000${identifier}`

/**
 * Adds the links' identifiers to their persons, merging persons a link joins, as if one by one: one
 * read of the identifiers named, then only what is new is written (most messages repeat a pair already
 * known, and cost the read alone). Run it in a transaction. Two replicas learning the same new pair
 * at once may each start a person; the next change naming both merges them.
 */
export const learnIdentities = (sql: SqlClient.SqlClient, links: ReadonlyArray<IdentityLink>, now: string) =>
  Effect.gen(function*() {
    if (links.length === 0) return
    const named = [
      ...new Map(
        links.flatMap((link) =>
          link.identifiers.map((identifier) =>
            [keyOf(link.organizationId, identifier), { o: link.organizationId, i: identifier }] as const
          )
        )
      ).values()
    ]
    const known = yield* sql<KnownIdentity>`SELECT u.organization_id, u.identifier, u.person_id
      FROM ${jsonArrayRows(sql, JSON.stringify(named), "k")}
      JOIN user_identities u ON u.organization_id = k.value ->> 'o' AND u.identifier = k.value ->> 'i'`
    const personOf = new Map(known.map((row) => [keyOf(row.organization_id, row.identifier), row.person_id]))
    // A person merged into another lives on as the other (followed to the end of the chain).
    const mergedInto = new Map<string, string>()
    const current = (person: string): string => {
      let at = person
      for (let next = mergedInto.get(at); next !== undefined; next = mergedInto.get(at)) at = next
      return at
    }
    const merges: Array<{ readonly organizationId: string; readonly from: string; readonly into: string }> = []
    const added: Array<{ organization_id: string; identifier: string; person_id: string; learned_at: string }> = []
    for (const link of links) {
      const persons = [
        ...new Set(link.identifiers.flatMap((identifier) => {
          const person = personOf.get(keyOf(link.organizationId, identifier))
          return person === undefined ? [] : [current(person)]
        }))
      ]
      const into = persons[0] ?? newId("person")
      for (const from of persons.slice(1)) {
        mergedInto.set(from, into)
        merges.push({ organizationId: link.organizationId, from, into })
      }
      for (const identifier of link.identifiers) {
        const key = keyOf(link.organizationId, identifier)
        if (personOf.has(key)) continue
        personOf.set(key, into)
        added.push({ organization_id: link.organizationId, identifier, person_id: into, learned_at: now })
      }
    }
    // In the order made: a chain (a into b, then b into c) ends with every row in c.
    for (const merge of merges) {
      yield* sql`UPDATE user_identities SET person_id = ${merge.into}
        WHERE organization_id = ${merge.organizationId} AND person_id = ${merge.from}`
    }
    // An identifier added meanwhile by another replica keeps its person (see above).
    yield* Effect.forEach(
      powerOfTwoChunks(added.map((row) => ({ ...row, person_id: current(row.person_id) }))),
      (chunk) =>
        sql`INSERT INTO user_identities ${sql.insert(chunk)} ON CONFLICT (organization_id, identifier) DO NOTHING`,
      { discard: true }
    )
  })

/**
 * Every identifier of the person `identifier` names in the organization, itself first (alone when the
 * hub has learned no pair for it).
 */
export const identifiersOf = (sql: SqlClient.SqlClient, organizationId: OrganizationId, identifier: string) =>
  Effect.map(
    sql<{ readonly identifier: string }>`SELECT identifier FROM user_identities
      WHERE organization_id = ${organizationId}
        AND person_id = (SELECT person_id FROM user_identities WHERE organization_id = ${organizationId} AND identifier = ${identifier})
      LIMIT ${MAX_IDENTIFIERS}`,
    (rows) => [...new Set([identifier, ...rows.map((row) => row.identifier)])]
  )
