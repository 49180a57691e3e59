/**
 * Every page of the dashboard checked by axe-core (WCAG 2.1 A and AA rules: names and labels,
 * contrast, landmarks, ARIA use), on a laptop screen and a phone screen, with content on each page
 * and its forms open: the webhook operations (kinds, headers, health, test, recover), the delivery
 * search, the sandbox's simulated changes.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, type OpenedPage, openPage, PHONE } from "./support/Browser.js"
import { type RunningHub, startHub } from "./support/Hub.js"
import { type Receiver, startReceiver } from "./support/Receiver.js"

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

let hub: RunningHub
let browser: Browser
let receiver: Receiver
let filteredReceiver: Receiver
let filteredId = ""
let broadcastId = ""
const opened: Array<OpenedPage> = []

beforeAll(async () => {
  hub = await startHub({
    HUB_SANDBOX_STATUS_DELAY: "100ms",
    HUB_WEBHOOK_RETRY: "200ms",
    HUB_SANDBOX_APPROVAL_DELAY: "0s"
  })
  browser = await launchBrowser()
  receiver = await startReceiver((index) => (index === 0 ? 500 : 200))
  filteredReceiver = await startReceiver(() => 200)
  // Content for every page: a webhook with a delivery of two attempts, messages both ways, and a
  // webhook that takes some kinds, with custom headers (one secret) and a delivery.
  expect((await hub.api("POST", "/api/webhooks", hub.instanceToken, { url: receiver.url, name: "receiver" })).status)
    .toBe(201)
  const filtered = await hub.api("POST", "/api/webhooks", hub.instanceToken, {
    url: filteredReceiver.url,
    name: "filtered hook",
    events: ["messages", "account_update"],
    headers: { authorization: "Bearer a11y", "x-tenant": "acme" }
  })
  expect(filtered.status).toBe(201)
  const body: unknown = filtered.body
  filteredId = typeof body === "object" && body !== null && "id" in body ? String(body.id) : ""
  expect(
    (await hub.api("POST", "/api/messages", hub.instanceToken, {
      to: "15551234567",
      type: "text",
      text: { body: "hi" }
    })).status
  ).toBe(200)
  expect(
    (await hub.api("POST", "/sandbox/inbound", hub.instanceToken, {
      from: "16505551234",
      type: "text",
      text: { body: "hello" }
    })).status
  ).toBe(200)
  // A broadcast of an approved template, one of its recipients refused by the sandbox (a failure by reason).
  expect(
    (await hub.api("POST", "/templates", hub.instanceToken, {
      name: "a11y_notice",
      language: "en_US",
      category: "UTILITY",
      components: [{ type: "BODY", text: "Hello {{1}}", example: { body_text: [["Ana"]] } }]
    })).status
  ).toBe(200)
  const broadcast = await hub.api("POST", "/api/broadcasts", hub.instanceToken, {
    name: "a11y broadcast",
    template: { name: "a11y_notice", language: { code: "en_US" } },
    recipients: [
      { to: "16505550301", components: [{ type: "body", parameters: [{ type: "text", text: "Ana" }] }] },
      { to: "999131030000", components: [{ type: "body", parameters: [{ type: "text", text: "Ben" }] }] }
    ]
  })
  expect(broadcast.status).toBe(201)
  const created: unknown = broadcast.body
  broadcastId = typeof created === "object" && created !== null && "id" in created ? String(created.id) : ""
  // "receiver" is refused once and then receives it; "filtered hook" receives it at once.
  await receiver.received(2)
  await filteredReceiver.received(1)
})

afterAll(async () => {
  for (const page of opened) await page.close()
  await browser?.close()
  await receiver?.close()
  await filteredReceiver?.close()
  await hub?.stop()
})

const open = async (options: Parameters<typeof openPage>[2] = {}) => {
  const page = await openPage(browser, hub.baseUrl, { ...options, bypassCSP: true })
  opened.push(page)
  return page.page
}

/** axe's WCAG 2.1 A/AA violations on the page as it is now, as `rule: target` lines. */
const violations = async (page: Page): Promise<ReadonlyArray<string>> => {
  await page.addScriptTag({ content: axeSource })
  const found: unknown = await page.evaluate(
    `axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
    .then((result) => result.violations.flatMap((v) => v.nodes.map((n) => v.id + ": " + n.target.join(" ") + " — " + n.failureSummary)))`
  )
  return Array.isArray(found) ? found.map(String) : [`axe gave no result: ${String(found)}`]
}

const signIn = async (page: Page, token: string) => {
  await page.goto(`${hub.baseUrl}/dashboard`)
  expect(await violations(page)).toEqual([])
  await page.getByLabel("Token", { exact: true }).fill(token)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

const visit = async (page: Page, path: string, ready: (page: Page) => Promise<void>) => {
  await page.goto(`${hub.baseUrl}/dashboard${path}`)
  await ready(page)
  expect(await violations(page), path).toEqual([])
}

describe("accessibility (axe-core, WCAG 2.1 AA)", () => {
  for (const [screen, viewport] of [["a laptop", undefined], ["a phone", PHONE]] as const) {
    it(`every page on ${screen}`, async () => {
      const page = await open(viewport === undefined ? {} : { viewport, mobile: true })
      await signIn(page, hub.sessionToken)
      await visit(page, "/tokens", (p) => p.getByRole("cell", { name: "demo organization token" }).waitFor())
      await page.getByRole("button", { name: "Sign out" }).click()

      await signIn(page, hub.organizationToken)
      await visit(page, "/overview", async (p) => {
        await p.getByRole("img", { name: /Send queue depth per minute/ }).waitFor()
        await p.getByText("The samples as a table").first().click()
      })
      await visit(page, "/instances", (p) => p.getByText(/in the last 24 h/).waitFor())
      await visit(page, "/messages", async (p) => {
        await p.getByRole("button", { name: /^Timeline of/ }).first().click()
        await p.getByRole("region", { name: "Status timeline" }).waitFor()
      })
      // The webhook list, with the create form's kinds and headers open.
      await visit(page, "/webhooks", async (p) => {
        await p.getByRole("link", { name: "receiver" }).waitFor()
        await p.getByLabel("Only the kinds chosen").check()
        await p.getByRole("checkbox", { name: "statuses", exact: true }).check()
        await p.getByRole("button", { name: "Add a header" }).click()
        await p.getByRole("button", { name: "Add a header" }).click()
      })
      await visit(page, "/deliveries", async (p) => {
        await p.getByRole("button", { name: "2 attempts" }).click()
        await p.getByText("HTTP 500").waitFor()
      })
      // A webhook's page with every section in use: a test's outcome, a recover's, the filter and its headers.
      await visit(page, `/webhooks/${filteredId}`, async (p) => {
        await p.getByRole("region", { name: "Health" }).getByText("Attempts in the last 24 hours").waitFor()
        await p.getByRole("button", { name: "Send a test event" }).click()
        await p.getByText(/^Delivered: the receiver answered HTTP 200/).waitFor()
        await p.getByRole("button", { name: "Recover failed deliveries" }).click()
        await p.getByText("Nothing to recover").waitFor()
        const headers = p.getByRole("region", { name: "Custom headers" })
        await headers.getByRole("button", { name: "Add a header" }).click()
        await headers.getByLabel("Header 3 Name").fill("Host")
        await headers.getByLabel("Header 3 Value").fill("elsewhere.example")
        await headers.getByRole("button", { name: "Save headers" }).click()
        await headers.getByRole("alert").getByText(/header host is set by the hub/).waitFor()
        await headers.getByRole("button", { name: "Replace the value of authorization" }).click()
      })
      await visit(page, "/sandbox", async (p) => {
        await p.getByRole("button", { name: "Simulate inbound message" }).waitFor()
        await p.getByRole("button", { name: "Add a change" }).click()
      })
      await visit(page, "/events", (p) => p.getByText("connected", { exact: true }).waitFor())
      // Broadcasts: the send queues, the list, the form with a CSV that has a row to fix and a time to send at.
      await visit(page, "/broadcasts", async (p) => {
        await p.getByRole("link", { name: "a11y broadcast" }).waitFor()
        await p.getByText("80 messages/s").waitFor()
        await p.getByLabel("Recipients (CSV)").fill("to,name\n16505550301,Ana\nnobody,Ben")
        await p.getByText("Line 3:", { exact: false }).waitFor()
        await p.getByLabel("At a time (up to 35 days ahead)").check()
      })
      // A broadcast's page: its counts, the chart with its table open, failures by reason, recipients.
      await visit(page, `/broadcasts/${broadcastId}`, async (p) => {
        await p.getByRole("region", { name: "Failures by reason" }).getByText("refused", { exact: true }).waitFor()
        await p.getByText("The samples as a table").click()
        await p.getByRole("table", { name: /Recipients by status at each reading/ }).waitFor()
        await p.getByRole("link", { name: "Every message with 999131030000" }).waitFor()
      })
      if (viewport !== undefined) {
        await page.getByRole("button", { name: "Menu" }).click()
        expect(await violations(page)).toEqual([])
      }

      await page.goto(`${hub.baseUrl}/dashboard/webhooks`)
      await page.getByRole("link", { name: "receiver" }).click()
      await page.getByRole("button", { name: "2 attempts" }).click()
      await page.getByText("HTTP 500").waitFor()
      await page.getByRole("button", { name: "Rotate secret" }).click()
      expect(await violations(page)).toEqual([])
    })
  }
})
