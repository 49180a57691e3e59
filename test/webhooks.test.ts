import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Duration, Effect, Option, Redacted } from "effect"
import type { HubClient } from "../src/Client.js"
import { errorBody } from "../src/Domain/Errors.js"
import { classifyAddress } from "../src/Net/AddressRanges.js"
import { AddressRefused, type HostLookup, makeUrlPolicy } from "../src/Net/UrlPolicy.js"
import { padded, powerOfTwoChunks } from "../src/Sql/StatementShapes.js"
import { engines } from "./support/Databases.js"
import { makeReceiver } from "./support/Receivers.js"
import { refusedWith } from "./support/Refusal.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { addInstance, itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import {
  createTyped,
  deliveriesFirstPage,
  deliveriesTyped,
  postUpstream,
  readTyped,
  typedClient,
  updateTyped,
  type WebhookInput
} from "./support/TypedWebhooks.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const RECORD_KEYS = [
  "active",
  "created_at",
  "deliveries_24h",
  "disabled_reason",
  "events",
  "failing_since",
  "headers",
  "id",
  "instance_id",
  "kind",
  "last_success_at",
  "name",
  "ordering",
  "queued",
  "updated_at",
  "url"
]

/**
 * POST /api/webhooks raw, for what the typed client refuses to encode (the hub's own checks are
 * under test: invalid URLs and names, credentials in a URL).
 */
const createRaw = (token: string, json: Record<string, unknown>) =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", "/api/webhooks", { token, json }))

/** What a call of the webhooks group fails with, whichever it is. */
type RouteError =
  | Effect.Effect.Error<ReturnType<HubClient["webhooks"]["test"]>>
  | Effect.Effect.Error<ReturnType<HubClient["webhooks"]["update"]>>

/** A creation the hub must refuse with a 400: the refusal's ErrorBody, as the wire had it. */
const createRefused = (token: string, payload: WebhookInput) =>
  Effect.map(refusedWith(createTyped(token, payload), "BadRequest"), errorBody)

for (const engine of engines) {
  layer(testHub({ engine }), { excludeTestServices: true })(`webhooks API (${engine})`, (it) => {
    it.effect("create answers 201 with the record and a whsec_ secret shown only once, stored encrypted", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        // 201 and no key beyond the record's: the answer is checked against the document, whose WebhookCreated allows none.
        const created = yield* createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: "https://example.com/hooks/wa",
          name: "orders"
        })
        expect(Object.keys(created).sort()).toEqual([...RECORD_KEYS, "secret"].sort())
        expect(created).toMatchObject({
          instance_id: tenant.instanceId,
          url: "https://example.com/hooks/wa",
          name: "orders",
          active: true,
          events: ["*"],
          headers: {},
          disabled_reason: null,
          failing_since: null,
          last_success_at: null,
          deliveries_24h: { succeeded: 0, failed: 0, dead: 0 },
          queued: { pending: 0, failed: 0, held: 0 }
        })
        expect(created.id).toMatch(/^whk_/)
        const secret = created.secret
        expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
        expect(Buffer.from(secret.slice(6), "base64").length).toBe(24)
        expect(created.created_at).toBe(created.updated_at)

        const read = yield* readTyped(tenant.instanceToken, created.id)
        expect(Object.keys(read).sort()).toEqual(RECORD_KEYS)
        const listed = yield* (yield* typedClient(tenant.orgToken)).webhooks.list({ urlParams: {} })
        expect(listed.data).toEqual([read])
        expect(JSON.stringify(listed)).not.toContain(secret)
        const stored = JSON.stringify(yield* sql`SELECT * FROM webhooks`)
        expect(stored).not.toContain(secret)
        expect(stored).not.toContain(secret.slice(6))
      }))

    it.effect("instance tokens act for their own instance; organization tokens must name one of theirs", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        const byInstance = yield* createTyped(tenant.instanceToken, { url: "https://example.com/a", name: "a" })
        expect(byInstance.instance_id).toBe(tenant.instanceId)
        const explicit = yield* createTyped(tenant.instanceToken, {
          instance_id: tenant.instanceId,
          url: "https://example.com/b",
          name: "b"
        })
        expect(explicit.instance_id).toBe(tenant.instanceId)

        const sibling = yield* addInstance(tenant)
        const foreign = yield* refusedWith(
          createTyped(tenant.instanceToken, {
            instance_id: sibling.instanceId,
            url: "https://example.com/c",
            name: "c"
          }),
          "Forbidden"
        )
        expect(errorBody(foreign)).toMatchObject({ statusCode: 403, error: "forbidden_instance" })

        const unnamed = yield* createRefused(tenant.orgToken, { url: "https://example.com/d", name: "d" })
        expect(unnamed).toMatchObject({ statusCode: 400, error: "instance_required" })
        const theirs = yield* refusedWith(
          createTyped(tenant.orgToken, { instance_id: other.instanceId, url: "https://example.com/e", name: "e" }),
          "NotFound"
        )
        expect(errorBody(theirs)).toEqual({
          statusCode: 404,
          message: `instance_id ${other.instanceId} was not found`,
          error: "not_found"
        })
        const toSibling = yield* createTyped(tenant.orgToken, {
          instance_id: sibling.instanceId,
          url: "https://example.com/f",
          name: "f"
        })
        expect(toSibling.instance_id).toBe(sibling.instanceId)

        const bySession = yield* refusedWith(
          createTyped(tenant.sessionToken, { instance_id: tenant.instanceId, url: "https://example.com/g", name: "g" }),
          "Forbidden"
        )
        expect(errorBody(bySession)).toMatchObject({ error: "forbidden_token_kind" })
      }))

    it.effect("listing: an organization sees all its instances' webhooks (instance_id filters), an instance only its own", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const sibling = yield* addInstance(tenant)
        const mine = yield* createTyped(tenant.instanceToken, { url: "https://example.com/mine", name: "mine" })
        const theirs = yield* createTyped(sibling.instanceToken, { url: "https://example.com/theirs", name: "theirs" })
        const ids = (list: { readonly data: ReadonlyArray<{ readonly id: string }> }) => list.data.map((w) => w.id)
        const byOrg = yield* typedClient(tenant.orgToken)
        const byInstance = yield* typedClient(tenant.instanceToken)

        expect(ids(yield* byOrg.webhooks.list({ urlParams: {} })).sort()).toEqual([mine.id, theirs.id].sort())
        const filtered = yield* byOrg.webhooks.list({ urlParams: { instance_id: sibling.instanceId } })
        expect(ids(filtered)).toEqual([theirs.id])
        expect(ids(yield* byInstance.webhooks.list({ urlParams: {} }))).toEqual([mine.id])
        yield* refusedWith(byInstance.webhooks.list({ urlParams: { instance_id: sibling.instanceId } }), "Forbidden")
        const stranger = yield* typedClient((yield* seedTenant()).orgToken)
        yield* refusedWith(stranger.webhooks.list({ urlParams: { instance_id: tenant.instanceId } }), "NotFound")
      }))

    it.effect("another tenant's or another instance's webhook is 404 on every route", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const sibling = yield* addInstance(tenant)
        const stranger = yield* seedTenant()
        const created = yield* createTyped(tenant.instanceToken, { url: "https://example.com/x", name: "x" })
        const id = created.id
        for (const token of [stranger.orgToken, stranger.instanceToken, sibling.instanceToken]) {
          const { webhooks } = yield* typedClient(token)
          const routes: ReadonlyArray<readonly [string, Effect.Effect<unknown, RouteError>]> = [
            ["get", webhooks.get({ path: { id } })],
            ["update", webhooks.update({ path: { id }, payload: { name: "stolen" } })],
            ["remove", webhooks.remove({ path: { id } })],
            ["deliveries", webhooks.deliveries({ path: { id }, urlParams: deliveriesFirstPage })],
            ["retry", webhooks.retry({ path: { id, deliveryId: "dlv_x" } })],
            ["rotateSecret", webhooks.rotateSecret({ path: { id } })],
            ["recover", webhooks.recover({ path: { id }, payload: { since: "2026-01-01" } })],
            ["test", webhooks.test({ path: { id }, headers: {} })]
          ]
          for (const [name, call] of routes) {
            const refused = yield* refusedWith(call, "NotFound")
            expect(errorBody(refused), name).toEqual({
              statusCode: 404,
              message: `webhook ${id} was not found`,
              error: "not_found"
            })
          }
        }
        expect(yield* readTyped(tenant.orgToken, id)).toMatchObject({ name: "x", active: true })
      }))

    it.effect("PATCH changes url, name and active; needs at least one field; unknown ids are 404", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const created = yield* createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: "https://example.com/1",
          name: "one"
        })
        // Raw: a name with spaces around it, which the hub trims (the typed client takes the trimmed side only).
        const renamed = yield* hub.request("PATCH", `/api/webhooks/${created.id}`, {
          token: tenant.orgToken,
          json: { name: "  two  ", url: "http://example.org/2" }
        })
        expect(renamed.status).toBe(200)
        expect(renamed.body).toMatchObject({ id: created.id, name: "two", url: "http://example.org/2", active: true })
        expect(Date.parse(String(renamed.body.updated_at))).toBeGreaterThanOrEqual(Date.parse(created.updated_at))
        const off = yield* updateTyped(tenant.instanceToken, created.id, { active: false })
        expect(off).toMatchObject({ active: false, name: "two", disabled_reason: "manual" })
        const on = yield* updateTyped(tenant.instanceToken, created.id, { active: true })
        expect(on).toMatchObject({ active: true, disabled_reason: null })

        // Raw: bodies the typed client refuses to encode, to see the hub refuse them.
        const path = `/api/webhooks/${created.id}`
        const empty = yield* hub.request("PATCH", path, { token: tenant.orgToken, json: {} })
        expect(empty.status).toBe(400)
        expect(empty.body).toMatchObject({
          error: "validation_failed",
          details: [{ field: "body", message: "give at least one of url, name, active, events, headers, ordering" }]
        })
        const bad = yield* hub.request("PATCH", path, {
          token: tenant.orgToken,
          json: { url: "ftp://example.com", active: "yes" }
        })
        expect(bad.status).toBe(400)
        expect(itemsOf(bad.body, "details").map((d) => String(d.field)).sort()).toEqual(["active", "url"])
        yield* refusedWith(updateTyped(tenant.orgToken, "whk_unknown", { name: "n" }), "NotFound")
      }))

    it.effect("DELETE answers 204, after which the webhook is gone", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const created = yield* createTyped(tenant.instanceToken, { url: "https://example.com/bye", name: "bye" })
        // A 204 without a body: the document check refuses any other answer (its 204 has no content).
        yield* (yield* typedClient(tenant.instanceToken)).webhooks.remove({ path: { id: created.id } })
        const byOrg = yield* typedClient(tenant.orgToken)
        yield* refusedWith(byOrg.webhooks.get({ path: { id: created.id } }), "NotFound")
        yield* refusedWith(byOrg.webhooks.remove({ path: { id: created.id } }), "NotFound")
        expect((yield* byOrg.webhooks.list({ urlParams: {} })).data).toEqual([])
      }))

    describe("raw requests: what the typed client refuses to encode", () => {
      // Raw: invalid URLs and names, which the typed client refuses to encode; the hub's refusal is under test.
      it.effect("validation names every failing field: url http(s) and at most 2048 characters, name 1 to 100", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const both = yield* createRaw(tenant.instanceToken, { url: "javascript:alert(1)", name: "" })
          expect(both.status).toBe(400)
          expect(both.body).toMatchObject({ statusCode: 400, error: "validation_failed" })
          expect(both.body.details).toEqual([
            { field: "url", message: "must be an http or https URL" },
            { field: "name", message: "must not be empty" }
          ])
          const long = yield* createRaw(tenant.instanceToken, {
            url: `https://example.com/${"a".repeat(2030)}`,
            name: "n".repeat(101)
          })
          expect(long.body.details).toEqual([
            { field: "url", message: "must be at most 2048 characters" },
            { field: "name", message: "must be at most 100 characters" }
          ])
          const missing = yield* createRaw(tenant.instanceToken, {})
          expect(missing.body.details).toEqual([{ field: "name", message: "is missing" }])
          // Whether a url is needed depends on the kind: checked once the fields themselves are valid.
          const noUrl = yield* createRaw(tenant.instanceToken, { name: "orders" })
          expect(noUrl.body.details).toEqual([{
            field: "url",
            message: "is required (or give kind \"poll\" for a webhook you poll)"
          }])
          const fits = yield* createTyped(tenant.instanceToken, {
            url: `https://example.com/${"a".repeat(2048 - 20)}`,
            name: "n".repeat(100)
          })
          expect(fits.name).toBe("n".repeat(100))
        }))

      // Raw: a URL with credentials, which the typed client refuses to encode; the hub's refusal is under test.
      it.effect("a URL with credentials (user:password@) is refused at creation and on update, saying why", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const why =
            "must not hold credentials (user:password@): credentials in URLs are not allowed; send them in a custom header such as authorization"
          for (
            const url of [
              "https://user:pa55word@example.com/hook",
              "https://user@example.com/hook",
              "http://:pa55word@example.com/"
            ]
          ) {
            const refused = yield* createRaw(tenant.instanceToken, { url, name: "credentials" })
            expect(refused.status, url).toBe(400)
            expect(refused.body, url).toMatchObject({
              statusCode: 400,
              error: "validation_failed",
              details: [{ field: "url", message: why }]
            })
            expect(refused.text).not.toContain("pa55word")
          }
          const created = yield* createTyped(tenant.instanceToken, { url: "https://example.com/hook", name: "plain" })
          const moved = yield* hub.request("PATCH", `/api/webhooks/${created.id}`, {
            token: tenant.instanceToken,
            json: { url: "https://user:pa55word@example.com/hook" }
          })
          expect(moved.status).toBe(400)
          expect(moved.body).toMatchObject({ error: "validation_failed", details: [{ field: "url", message: why }] })
          expect((yield* readTyped(tenant.instanceToken, created.id)).url).toBe("https://example.com/hook")
        }))
    })

    it.effect("rotate-secret returns a new secret and when the old one stops signing", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const created = yield* createTyped(tenant.instanceToken, { url: "https://example.com/r", name: "r" })
        const before = Date.now()
        const rotated = yield* (yield* typedClient(tenant.orgToken)).webhooks.rotateSecret({ path: { id: created.id } })
        expect(Object.keys(rotated).sort()).toEqual(["previous_secret_expires_at", "secret"])
        expect(rotated.secret).toMatch(/^whsec_/)
        expect(rotated.secret).not.toBe(created.secret)
        const until = Date.parse(rotated.previous_secret_expires_at) - before
        expect(until).toBeGreaterThanOrEqual(24 * 3600_000 - 1000)
        expect(until).toBeLessThanOrEqual(24 * 3600_000 + 60_000)
      }))
  })
}

// A hub in front of the real Graph API refuses webhook URLs that reach internal addresses.
const GRAPH = { upstream: "graph", secretKey: Option.some(Redacted.make(new Uint8Array(32).fill(7))) } as const

/** A resolver answering from a table; other names fail as the system's would. */
const tableLookup = (answers: Record<string, ReadonlyArray<string>>): HostLookup => (host) => {
  const addresses = answers[host]
  return Promise.resolve(
    addresses === undefined ? new AddressRefused({ message: `the host ${host} could not be resolved` }) : addresses
  )
}

const INTERNAL_DNS = {
  "internal.example.com": ["10.1.2.3"],
  "mixed.example.com": ["93.184.215.14", "fd00::5"],
  "metadata.example.com": ["169.254.169.254"],
  "nat64.example.com": ["64:ff9b::a9fe:a9fe"],
  "public.example.com": ["93.184.215.14", "2606:4700:4700::1111"]
}

layer(testHub({ ...GRAPH, hostLookup: tableLookup(INTERNAL_DNS) }), {
  excludeTestServices: true
})(
  "webhook URL policy outside the sandbox",
  (it) => {
    it.effect("every non-public literal is refused at creation and on update, the literal and its kind named", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const refused = [
          ["http://127.0.0.1/hook", "127.0.0.1 is not a public address (loopback)"],
          ["http://10.0.0.1/hook", "10.0.0.1 is not a public address (private)"],
          ["https://192.168.1.20:8443/x", "192.168.1.20 is not a public address (private)"],
          ["http://172.20.0.5/", "172.20.0.5 is not a public address (private)"],
          ["http://169.254.169.254/latest/meta-data", "169.254.169.254 is not a public address (cloud metadata)"],
          ["http://100.64.1.1/", "100.64.1.1 is not a public address (shared)"],
          ["http://0.0.0.0:8080/", "0.0.0.0 is not a public address (unspecified)"],
          ["http://198.18.0.1/", "198.18.0.1 is not a public address (benchmarking)"],
          ["http://[::1]/hook", "::1 is not a public address (loopback)"],
          ["http://[fd12:3456::1]/hook", "fd12:3456::1 is not a public address (unique-local)"],
          // The URL parser writes the mapped address in hex; the embedded 10.1.2.3 is what is classified.
          ["http://[::ffff:10.1.2.3]/hook", "::ffff:a01:203 is not a public address (private)"],
          ["http://[64:ff9b::7f00:1]/hook", "64:ff9b::7f00:1 is not a public address (loopback)"],
          ["http://[2002:c0a8:101::1]/hook", "2002:c0a8:101::1 is not a public address (private)"],
          ["http://[2001:0:4136:e378::1]/hook", "2001:0:4136:e378::1 is not a public address (tunnel)"],
          ["http://[fd00:ec2::254]/", "fd00:ec2::254 is not a public address (cloud metadata)"]
        ] as const
        for (const [url, reason] of refused) {
          const answer = yield* createRefused(tenant.instanceToken, { url, name: "internal" })
          expect(answer, url).toMatchObject({ statusCode: 400, error: "url_not_allowed", details: [{ field: "url" }] })
          expect(answer.message, url).toBe(`url is not allowed: ${reason}; webhooks must reach a public address`)
        }
        const publicAddress = yield* createTyped(tenant.instanceToken, {
          url: "https://93.184.215.14/hook",
          name: "public"
        })
        const moved = yield* refusedWith(
          updateTyped(tenant.instanceToken, publicAddress.id, { url: "http://10.1.1.1/" }),
          "BadRequest"
        )
        expect(errorBody(moved)).toMatchObject({ statusCode: 400, error: "url_not_allowed" })
        const unchanged = yield* readTyped(tenant.instanceToken, publicAddress.id)
        expect(unchanged.url).toBe("https://93.184.215.14/hook")
      }))

    it.effect("a name resolving to any non-public address is refused without revealing the address", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        for (const [host, addresses] of Object.entries(INTERNAL_DNS)) {
          if (host === "public.example.com") continue
          const answer = yield* createRefused(tenant.instanceToken, { url: `https://${host}/hook`, name: "named" })
          expect(answer, host).toEqual({
            statusCode: 400,
            message:
              `url is not allowed: ${host} resolves to a non-public address; webhooks must reach a public address`,
            error: "url_not_allowed",
            details: [{
              field: "url",
              message: `${host} resolves to a non-public address; webhooks must reach a public address`
            }]
          })
          for (const address of addresses) expect(JSON.stringify(answer)).not.toContain(address)
        }
        const allowed = yield* createTyped(tenant.instanceToken, {
          url: "https://public.example.com/hook",
          name: "public"
        })
        expect(allowed.url).toBe("https://public.example.com/hook")
      }))
  }
)

/** Names the private-network hub resolves: to metadata in IPv6 forms, or to answers a URL cannot be pinned to. */
const PRIVATE_DNS = {
  "siit.example.com": ["::ffff:0:a9fe:a9fe"],
  "local-nat64.example.com": ["64:ff9b:1::a9fe:a9fe"],
  "isatap.example.com": ["2606:4700::5efe:a9fe:a9fe"],
  // The system resolver would answer 127.0.0.1, where the test's receiver listens: never asked at delivery.
  localhost: ["fe80::1%lo"]
}

layer(
  testHub({
    ...GRAPH,
    webhookAllowPrivate: true,
    webhookRetry: [Duration.hours(1)],
    hostLookup: tableLookup(PRIVATE_DNS)
  }),
  { excludeTestServices: true }
)("HUB_WEBHOOK_ALLOW_PRIVATE=true", (it) => {
  it.effect("private addresses are accepted; cloud metadata addresses are still refused, in every IPv6 form that embeds them", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const answer = yield* createTyped(tenant.instanceToken, { url: "http://127.0.0.1:9/hook", name: "local" })
      expect(answer.url).toBe("http://127.0.0.1:9/hook")
      for (
        const url of [
          "http://169.254.169.254/latest/meta-data/",
          "http://[::ffff:169.254.170.2]/v2/credentials",
          "http://[fd00:ec2::254]/",
          "http://100.100.100.200/",
          "http://[::ffff:0:169.254.169.254]/",
          "http://[::169.254.169.254]/",
          "http://[64:ff9b::169.254.169.254]/",
          "http://[64:ff9b:1::169.254.169.254]/",
          "http://[64:ff9b:1:a9fe:a9:fe00::]/",
          "http://[2002:a9fe:a9fe::1]/",
          "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",
          "http://[2001:db8::5efe:169.254.169.254]/"
        ]
      ) {
        const refused = yield* createRefused(tenant.instanceToken, { url, name: "metadata" })
        expect(refused, url).toMatchObject({ statusCode: 400, error: "url_not_allowed" })
        expect(refused.message, url).toContain("is not a public address (cloud metadata)")
      }
    }))

  it.scoped("at delivery a name resolving to an embedded metadata address, or to nothing a URL can be pinned to, is refused and never sent", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const client = yield* typedClient(tenant.instanceToken)
      const receiver = yield* makeReceiver()
      const port = new URL(receiver.url).port
      const cases = [
        ["siit.example.com", "siit.example.com resolves to a non-public address; webhooks must reach a public address"],
        [
          "local-nat64.example.com",
          "local-nat64.example.com resolves to a non-public address; webhooks must reach a public address"
        ],
        [
          "isatap.example.com",
          "isatap.example.com resolves to a non-public address; webhooks must reach a public address"
        ],
        ["localhost", "the host localhost resolves to no address a connection can be pinned to"]
      ] as const
      for (const [host, error] of cases) {
        // Without enforcement a name is registered unresolved; the delivery resolves and checks it.
        const created = yield* createTyped(tenant.instanceToken, { url: `http://${host}:${port}/hook`, name: host })
        const tested = yield* client.webhooks.test({ path: { id: created.id }, headers: {} })
        expect(tested, host).toMatchObject({
          status: "failed",
          attempts: 1,
          last_status_code: null,
          last_error: error
        })
      }
      expect(receiver.requests).toEqual([])
    }))
})

layer(testHub(), { excludeTestServices: true })("webhook URL policy in the sandbox", (it) => {
  it.effect("cloud metadata addresses are refused in sandbox mode too; other addresses are accepted", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const lan = yield* createTyped(tenant.instanceToken, { url: "http://10.0.0.1/hook", name: "lan" })
      expect(lan.url).toBe("http://10.0.0.1/hook")
      const refused = yield* createRefused(tenant.instanceToken, { url: "http://169.254.169.254/", name: "metadata" })
      expect(refused).toMatchObject({
        statusCode: 400,
        error: "url_not_allowed",
        message:
          "url is not allowed: 169.254.169.254 is not a public address (cloud metadata); webhooks must reach a public address"
      })
    }))
})

/** Reads a webhook's delivery log until the condition holds: at once, then each time attempts are logged (bounded). */
const untilDelivered = (
  token: string,
  webhookId: string,
  condition: (data: Effect.Effect.Success<ReturnType<typeof deliveriesTyped>>) => boolean
) => untilAttemptsLogged("the delivery log reaching the expected state", deliveriesTyped(token, webhookId), condition)

const NEVER_ANSWERS: HostLookup = () => new Promise(() => {})

layer(
  testHub({ webhookTimeout: Duration.millis(300), webhookRetry: [Duration.hours(1)], hostLookup: NEVER_ANSWERS }),
  { excludeTestServices: true }
)("a resolver that never answers", (it) => {
  it.effect("the attempt fails at the webhook timeout and is logged; its slot is not held", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const created = yield* createTyped(tenant.instanceToken, {
        url: "http://silent-dns.example.com/hook",
        name: "silent"
      })
      yield* postUpstream(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]]))
      const [delivery] = yield* untilDelivered(tenant.instanceToken, created.id, (d) => d[0]?.attempts === 1)
      expect(delivery).toMatchObject({ status: "failed", attempts: 1, last_status_code: null })
      expect(delivery?.last_error).toBe(
        "the host silent-dns.example.com could not be resolved: no complete answer within 300 ms"
      )
      expect(delivery?.attempt_log).toEqual([
        expect.objectContaining({
          attempt: 1,
          status_code: null,
          error: "the host silent-dns.example.com could not be resolved: no complete answer within 300 ms"
        })
      ])
    }))
})

describe("address classifier", () => {
  // One or more addresses per range of AddressRanges.ts, IPv4 and IPv6, and public ones beside them.
  plain.each(
    [
      ["8.8.8.8", "public"],
      ["93.184.215.14", "public"],
      ["172.32.0.1", "public"],
      ["100.128.0.1", "public"],
      ["192.31.196.1", "public"],
      ["192.0.3.1", "public"],
      ["0.0.0.0", "unspecified"],
      ["0.1.2.3", "unspecified"],
      ["10.0.0.1", "private"],
      ["10.255.255.255", "private"],
      ["100.64.0.1", "shared"],
      ["100.127.255.255", "shared"],
      ["127.0.0.1", "loopback"],
      ["127.255.255.254", "loopback"],
      ["169.254.1.1", "link-local"],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["192.0.0.8", "protocol-assignment"],
      ["192.0.0.170", "protocol-assignment"],
      ["192.0.2.10", "documentation"],
      ["192.88.99.1", "reserved"],
      ["192.168.0.1", "private"],
      ["198.18.0.1", "benchmarking"],
      ["198.19.255.255", "benchmarking"],
      ["198.51.100.7", "documentation"],
      ["203.0.113.9", "documentation"],
      ["224.0.0.1", "multicast"],
      ["239.255.255.250", "multicast"],
      ["240.0.0.1", "reserved"],
      ["255.255.255.255", "broadcast"],
      ["169.254.169.254", "metadata"],
      ["169.254.170.2", "metadata"],
      ["169.254.170.23", "metadata"],
      ["169.254.0.23", "metadata"],
      ["100.100.100.200", "metadata"],
      ["192.0.0.192", "metadata"],
      ["168.63.129.16", "metadata"],
      ["2606:4700:4700::1111", "public"],
      ["2a00:1450:4001:80b::200e", "public"],
      ["2620:4f:8000::1", "public"],
      ["::", "unspecified"],
      ["::1", "loopback"],
      ["[::1]", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["::ffff:8.8.8.8", "public"],
      ["::ffff:169.254.169.254", "metadata"],
      ["::10.0.0.1", "private"],
      ["::8.8.8.8", "public"],
      ["::ffff:0:10.0.0.1", "private"],
      ["::ffff:0:8.8.8.8", "public"],
      // Every IPv6 form that carries a metadata address is metadata, wherever the address sits in it.
      ["::ffff:0:169.254.169.254", "metadata"],
      ["::ffff:0:a9fe:a9fe", "metadata"],
      ["::169.254.169.254", "metadata"],
      ["64:ff9b::169.254.170.2", "metadata"],
      ["64:ff9b:1::169.254.169.254", "metadata"],
      ["64:ff9b:1:a9fe:a9:fe00::", "metadata"],
      ["64:ff9b:1:a9:fe:a9fe::", "metadata"],
      ["64:ff9b:1:0:a9:fea9:fe00:0", "metadata"],
      ["64:ff9b:1:a9fe:a9:fe00::1", "metadata"],
      ["64:ff9b:1::10.0.0.1", "translation"],
      ["2002:a9fe:a9fe::1", "metadata"],
      ["2002:6464:64c8::", "metadata"],
      ["2001:0:a9fe:a9fe::1", "metadata"],
      ["2001:0:4136:e378:8000:63bf:5601:5601", "metadata"],
      ["2606:4700::5efe:169.254.169.254", "metadata"],
      ["2606:4700::200:5efe:169.254.169.254", "metadata"],
      ["fe80::5efe:a9fe:a9fe", "metadata"],
      ["2606:4700::200:5efe:8.8.8.8", "public"],
      ["64:ff9b::10.0.0.1", "private"],
      ["64:ff9b::8.8.8.8", "public"],
      ["64:ff9b::a9fe:a9fe", "metadata"],
      ["64:ff9b:1::8.8.8.8", "translation"],
      ["2002:a00:1::", "private"],
      ["2002:808:808::1", "public"],
      ["2002:7f00:1::", "loopback"],
      ["100::1", "discard"],
      ["100:0:0:1::1", "discard"],
      ["2001::1", "tunnel"],
      ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "tunnel"],
      ["2001:2::1", "benchmarking"],
      ["2001:3::1", "protocol-assignment"],
      ["2001:10::1", "identifier"],
      ["2001:20::1", "identifier"],
      ["2001:30::1", "identifier"],
      ["2001:1ff::1", "protocol-assignment"],
      ["2001:db8::1", "documentation"],
      ["3fff::1", "documentation"],
      ["5f00::1", "reserved"],
      ["fc00::1", "unique-local"],
      ["fdff:ffff::1", "unique-local"],
      ["fe80::1%eth0", "link-local"],
      ["febf::1", "link-local"],
      ["fec0::1", "site-local"],
      ["ff02::1", "multicast"],
      ["fd00:ec2::254", "metadata"],
      ["fd00:ec2::23", "metadata"],
      ["fd20:ce::254", "metadata"],
      ["4000::1", "reserved"],
      ["1::1", "reserved"],
      ["not-an-ip", "invalid"],
      ["1.2.3", "invalid"],
      ["01.2.3.4", "invalid"],
      ["0x7f.0.0.1", "invalid"]
    ] as const
  )("%s is %s", (address, expected) => {
    expect(classifyAddress(address)).toBe(expected)
  })
})

describe("delivery-time connection pinning", () => {
  const signal = new AbortController().signal

  plain.effect(
    "a host name is resolved once, checked, and the request goes to that address with the name as Host",
    () =>
      Effect.gen(function*() {
        const open = makeUrlPolicy(false)
        const target = yield* Effect.promise(() => open.connectTarget("http://localhost:4567/path?q=1", signal))
        expect(target).toEqual({
          url: "http://127.0.0.1:4567/path?q=1",
          hostHeader: "localhost:4567",
          serverName: undefined
        })
        const tls = yield* Effect.promise(() => open.connectTarget("https://localhost/secure", signal))
        expect(tls).toEqual({ url: "https://127.0.0.1/secure", hostHeader: "localhost", serverName: "localhost" })
        const literal = yield* Effect.promise(() => open.connectTarget("http://127.0.0.1:80/x", signal))
        expect(literal).toEqual({ url: "http://127.0.0.1/x", hostHeader: "127.0.0.1", serverName: undefined })

        const enforced = makeUrlPolicy(true)
        const refused = yield* Effect.promise(() => enforced.connectTarget("http://localhost:4567/path", signal))
        expect(refused).toBeInstanceOf(AddressRefused)
        expect(JSON.stringify(refused)).toContain("localhost resolves to a non-public address")
        expect(JSON.stringify(refused)).not.toContain("127.0.0.1")
        const unresolvable = yield* Effect.exit(enforced.check("http://no-such-host.invalid/"))
        expect(JSON.stringify(unresolvable)).toContain("could not be resolved")
      })
  )

  plain.effect(
    "without enforcement a name leading to cloud metadata is still refused at delivery",
    () =>
      Effect.gen(function*() {
        const open = makeUrlPolicy(false, {
          lookup: tableLookup({ "metadata.google.internal": ["169.254.169.254"], "lan.example": ["10.0.0.2"] })
        })
        yield* open.check("http://metadata.google.internal/computeMetadata/v1/")
        const refused = yield* Effect.promise(() =>
          open.connectTarget("http://metadata.google.internal/computeMetadata/v1/", signal)
        )
        expect(refused).toEqual(
          new AddressRefused({
            message: "metadata.google.internal resolves to a non-public address; webhooks must reach a public address"
          })
        )
        expect(yield* Effect.promise(() => open.connectTarget("http://lan.example/", signal))).toMatchObject({
          url: "http://10.0.0.2/"
        })
      })
  )

  plain.effect(
    "a host that cannot be pinned to a checked address is refused, never sent by name, whatever the settings",
    () =>
      Effect.gen(function*() {
        const dns = tableLookup({
          "zoned.example": ["fe80::1%eth0"],
          "empty.example": [],
          "cname.example": ["receiver.example"],
          "dual.example": ["fe80::1%eth0", "10.0.0.9"]
        })
        for (const enforced of [true, false]) {
          const policy = makeUrlPolicy(enforced, { lookup: dns })
          for (const host of ["zoned.example", "empty.example", "cname.example"]) {
            const refused = yield* Effect.promise(() => policy.connectTarget(`https://${host}/hook`, signal))
            expect(refused, host).toBeInstanceOf(AddressRefused)
          }
        }
        const open = makeUrlPolicy(false, { lookup: dns })
        expect(yield* Effect.promise(() => open.connectTarget("https://zoned.example/hook", signal))).toEqual(
          new AddressRefused({ message: "the host zoned.example resolves to no address a connection can be pinned to" })
        )
        expect(yield* Effect.promise(() => open.connectTarget("https://cname.example/hook", signal))).toEqual(
          new AddressRefused({
            message:
              "the host cname.example resolves to something that is not an IP address, which a connection cannot be pinned to"
          })
        )
        // Another checked address that can be pinned is used instead.
        expect(yield* Effect.promise(() => open.connectTarget("https://dual.example/hook", signal))).toEqual({
          url: "https://10.0.0.9/hook",
          hostHeader: "dual.example",
          serverName: "dual.example"
        })
      })
  )

  plain.effect(
    "a lookup that never answers is given up when the attempt's signal aborts, with the abort's reason",
    () =>
      Effect.gen(function*() {
        const policy = makeUrlPolicy(true, { lookup: NEVER_ANSWERS })
        const controller = new AbortController()
        const pending = policy.connectTarget("https://slow.example.com/hook", controller.signal)
        controller.abort(new DOMException("no answer within 50 ms", "TimeoutError"))
        expect(yield* Effect.promise(() => pending)).toEqual(
          new AddressRefused({ message: "the host slow.example.com could not be resolved: no answer within 50 ms" })
        )
        // Registration has its own deadline.
        const registration = makeUrlPolicy(true, { lookup: NEVER_ANSWERS, lookupTimeout: Duration.millis(20) })
        const timedOut = yield* Effect.flip(registration.check("https://slow.example.com/hook"))
        expect(timedOut.message).toMatch(/^the host slow\.example\.com could not be resolved: /)
      })
  )
})

describe("delivery-time address cache", () => {
  const signal = new AbortController().signal

  /** A resolver that answers from a table and counts what it was asked. */
  const countingLookup = (answers: Record<string, ReadonlyArray<string>>) => {
    const asked: Array<string> = []
    const answer = tableLookup(answers)
    const lookup = (host: string) => {
      asked.push(host)
      return answer(host)
    }
    return { asked, lookup }
  }

  plain.effect(
    "a name is looked up once for a few seconds, every address is still checked each time, failures are asked again",
    () =>
      Effect.gen(function*() {
        let now = 1_000_000
        const dns = countingLookup({
          "hooks.example.com": ["93.184.216.34"],
          "rebound.example.com": ["93.184.216.35", "10.0.0.7"]
        })
        const policy = makeUrlPolicy(true, { lookup: dns.lookup, clock: () => now })

        const first = yield* Effect.promise(() => policy.connectTarget("https://hooks.example.com/in", signal))
        const second = yield* Effect.promise(() => policy.connectTarget("https://hooks.example.com/other", signal))
        expect(first).toEqual({
          url: "https://93.184.216.34/in",
          hostHeader: "hooks.example.com",
          serverName: "hooks.example.com"
        })
        expect(second).toMatchObject({ url: "https://93.184.216.34/other" })
        expect(dns.asked).toEqual(["hooks.example.com"])

        // A cached answer holding a private address is refused on every delivery, not only the first.
        for (let i = 0; i < 2; i++) {
          const refused = yield* Effect.promise(() => policy.connectTarget("http://rebound.example.com/", signal))
          expect(refused).toBeInstanceOf(AddressRefused)
          expect(refused).toMatchObject({
            message: "rebound.example.com resolves to a non-public address; webhooks must reach a public address"
          })
        }
        expect(dns.asked).toEqual(["hooks.example.com", "rebound.example.com"])

        // IP literals need no lookup; an unresolvable name is asked again next time.
        expect(yield* Effect.promise(() => policy.connectTarget("http://93.184.216.36:8080/x", signal))).toMatchObject({
          url: "http://93.184.216.36:8080/x"
        })
        yield* Effect.promise(() => policy.connectTarget("http://gone.example.com/", signal))
        yield* Effect.promise(() => policy.connectTarget("http://gone.example.com/", signal))
        expect(dns.asked.filter((h) => h === "gone.example.com").length).toBe(2)

        // Once the cache time has passed the name is resolved again.
        now += 5_001
        yield* Effect.promise(() => policy.connectTarget("https://hooks.example.com/in", signal))
        expect(dns.asked.filter((h) => h === "hooks.example.com").length).toBe(2)
      })
  )

  plain("statement shapes: rows go in power-of-two chunks, IN lists are padded with their last item", () => {
    const sizes = (n: number) => powerOfTwoChunks(Array.from({ length: n }, (_, i) => i)).map((chunk) => chunk.length)
    expect(sizes(0)).toEqual([])
    expect(sizes(77)).toEqual([64, 8, 4, 1])
    expect(sizes(600)).toEqual([256, 256, 64, 16, 8])
    expect(powerOfTwoChunks(Array.from({ length: 600 }, (_, i) => i)).flat()).toEqual(
      Array.from({ length: 600 }, (_, i) => i)
    )
    expect(padded(["a", "b", "c"])).toEqual(["a", "b", "c", "c"])
    expect(padded(["a", "b", "c", "d"])).toEqual(["a", "b", "c", "d"])
    expect(padded([])).toEqual([])
  })
})

layer(testHub({ webhookTimeout: Duration.seconds(15) }), { excludeTestServices: true, timeout: 30_000 })(
  "a slow receiver",
  (it) => {
    it.scoped("a webhook test waits for an attempt that takes longer than Bun's default idle timeout (10 s): its answer arrives", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        // The receiver answers after 11 s: within the webhook timeout, past the 10 s Bun closed silent connections at.
        const receiver = yield* makeReceiver(() => ({ status: 200, delayMs: 11_000 }))
        const created = yield* createTyped(tenant.instanceToken, { url: receiver.url, name: "slow" })
        const client = yield* typedClient(tenant.instanceToken)
        const tested = yield* client.webhooks.test({ path: { id: created.id }, headers: {} })
        expect(tested).toMatchObject({ status: "succeeded", attempts: 1, last_status_code: 200 })
      }))
  }
)
