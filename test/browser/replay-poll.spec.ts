/**
 * Replay and pull (issue 33) in the dashboard, end to end: a real hub (sandbox upstream), Debian's
 * Chromium, receivers on 127.0.0.1. A new webhook is backfilled from its page's Replay form and
 * follows the replay's progress; a poll webhook is created from the form and its page reads its
 * events. Waits are on what the page or a receiver shows, never on a timer.
 */
import type { Browser, Page } from "playwright-core"
import { Webhook } from "standardwebhooks"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, type OpenedPage, openPage, screenshot } from "./support/Browser.js"
import { type RunningHub, startHub } from "./support/Hub.js"
import { startReceiver } from "./support/Receiver.js"

let hub: RunningHub
let browser: Browser
const opened: Array<OpenedPage> = []

beforeAll(async () => {
  hub = await startHub()
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  await hub?.stop()
})

afterEach(async () => {
  for (const page of opened.splice(0)) {
    await page.close()
    expect(page.foreignRequests).toEqual([])
    expect(page.errors).toEqual([])
  }
})

const signedIn = async () => {
  const opening = await openPage(browser, hub.baseUrl)
  opened.push(opening)
  const page = opening.page
  await page.goto(`${hub.baseUrl}/dashboard`)
  await page.getByLabel("Token", { exact: true }).fill(hub.organizationToken)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
  return page
}

const record = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? Object.fromEntries(Object.entries(u)) : {}

const simulate = async (decision: string) => {
  const simulated = await hub.api("POST", "/sandbox/changes", hub.organizationToken, {
    instance_id: hub.instanceId,
    changes: [{ field: "account_review_update", value: { decision } }]
  })
  expect(simulated.status).toBe(200)
}

const openWebhook = async (page: Page, id: string, name: string) => {
  await page.goto(`${hub.baseUrl}/dashboard/webhooks/${id}`)
  await page.getByRole("heading", { level: 1, name: new RegExp(name) }).waitFor()
}

describe("replay and pull in the dashboard", () => {
  it("backfills a new webhook from its Replay form and shows the replay's deliveries delivered", async () => {
    const live = await startReceiver(() => 200)
    const later = await startReceiver(() => 200)
    try {
      const first = await hub.api("POST", "/api/webhooks", hub.organizationToken, {
        instance_id: hub.instanceId,
        url: live.url,
        name: "live",
        events: ["account_review_update"]
      })
      expect(first.status).toBe(201)
      await simulate("APPROVED")
      await simulate("REJECTED")
      await live.received(2)
      const created = await hub.api("POST", "/api/webhooks", hub.organizationToken, {
        instance_id: hub.instanceId,
        url: later.url,
        name: "backfilled",
        events: ["account_review_update"]
      })
      const id = String(record(created.body).id)
      const page = await signedIn()
      await openWebhook(page, id, "backfilled")
      const replay = page.getByRole("region", { name: "Replay" })
      await replay.getByRole("button", { name: "Replay events" }).click()
      await replay.getByText(/^Queued 2 deliveries/).waitFor()
      const arrived = await later.received(2)
      expect(arrived.map((r) => JSON.stringify(JSON.parse(r.body).entry[0].changes[0].value.decision))).toEqual([
        "\"APPROVED\"",
        "\"REJECTED\""
      ])
      await replay.getByText(/0 queued, 2 delivered, 0 failed/).waitFor()
      await replay.scrollIntoViewIfNeeded()
      await screenshot(page, "webhook-replay")
    } finally {
      await live.close()
      await later.close()
    }
  })

  it("creates a poll webhook, whose page reads its events signed as a push would be", async () => {
    const page = await signedIn()
    await page.getByRole("navigation", { name: "Pages" }).getByRole("link", { name: "Webhooks" }).click()
    const form = page.getByRole("form", { name: "Add a webhook" })
    await form.getByLabel("Name", { exact: true }).fill("puller")
    await form.getByLabel("Poll it instead (no URL)").check()
    expect(await form.getByLabel("URL", { exact: true }).count()).toBe(0)
    await form.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
    await form.getByRole("button", { name: "Add webhook" }).click()
    const secret = await page.getByLabel("Secret", { exact: true }).inputValue()
    await page.getByRole("link", { name: "Open “puller”" }).click()
    await page.getByRole("heading", { level: 1, name: /puller/ }).waitFor()
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop() ?? "")
    // Nothing is pushed to it: no delivery log, no test, no replay.
    expect(await page.getByRole("region", { name: "Deliveries" }).count()).toBe(0)
    expect(await page.getByRole("region", { name: "Replay" }).count()).toBe(0)

    await simulate("DEFERRED")
    const poll = page.getByRole("region", { name: "Poll" })
    await poll.getByRole("button", { name: "Read from the start" }).click()
    await poll.getByRole("list", { name: "Polled events" }).getByText(/DEFERRED/).waitFor()
    await screenshot(page, "webhook-poll")

    // What the page read is what a consumer reads, verified with the secret the page showed.
    const polled = await hub.api("GET", `/api/webhooks/${id}/poll`, hub.organizationToken)
    const data = record(polled.body).data
    const event: unknown = Array.isArray(data) ? data[0] : undefined
    const headers = record(record(event).headers)
    const body = String(record(event).body)
    expect(
      JSON.stringify(
        new Webhook(secret).verify(body, {
          "webhook-id": String(headers["webhook-id"]),
          "webhook-timestamp": String(headers["webhook-timestamp"]),
          "webhook-signature": String(headers["webhook-signature"])
        })
      )
    ).toContain("DEFERRED")
  })
})
