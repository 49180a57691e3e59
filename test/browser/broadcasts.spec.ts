/**
 * Broadcasts in the dashboard, end to end: a real hub (sandbox upstream, templates approved at once,
 * statuses a second apart), Debian's Chromium through playwright-core. A broadcast made from a pasted
 * CSV goes out and its page follows it to read (one recipient refused by the sandbox); a scheduled
 * one made with an organization token from an uploaded file is cancelled from its page. Screenshots into docs/screenshots/.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, type OpenedPage, openPage, screenshot } from "./support/Browser.js"
import { type RunningHub, startHub } from "./support/Hub.js"

let hub: RunningHub
let browser: Browser
const opened: Array<OpenedPage> = []

/** The sandbox refuses sends to this number at once (code 131030, recipient not allowed). */
const REFUSED = "999131030000"

const record = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? Object.fromEntries(Object.entries(u)) : {}

beforeAll(async () => {
  // Templates are approved almost at once; each status follows the one before 2.5 s later, so the
  // broadcast's page (reading it every 3 s) samples its progress on the way.
  hub = await startHub({ HUB_SANDBOX_APPROVAL_DELAY: "200ms", HUB_SANDBOX_STATUS_DELAY: "2500ms" })
  browser = await launchBrowser()
  const created = await hub.api("POST", "/templates", hub.instanceToken, {
    name: "order_update",
    language: "en_US",
    category: "UTILITY",
    components: [{
      type: "BODY",
      text: "Hello {{1}}, your order {{2}} has shipped.",
      example: { body_text: [["Ana", "A-1042"]] }
    }]
  })
  expect(created.status).toBe(200)
  // The sandbox approves it after HUB_SANDBOX_APPROVAL_DELAY.
  for (let tries = 0;; tries++) {
    const list = await hub.api("GET", "/templates?status=APPROVED", hub.instanceToken)
    const data = record(list.body).data
    if (Array.isArray(data) && data.some((t) => record(t).name === "order_update")) break
    if (tries > 50) throw new Error(`the template was not approved: ${JSON.stringify(list.body)}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
})

afterAll(async () => {
  await browser?.close()
  await hub?.stop()
})

afterEach(async () => {
  // Every page kept to the hub's origin, and nothing was refused by its Content-Security-Policy or thrown.
  for (const page of opened.splice(0)) {
    await page.close()
    expect(page.foreignRequests).toEqual([])
    expect(page.errors).toEqual([])
  }
})

const open = async () => {
  const page = await openPage(browser, hub.baseUrl)
  opened.push(page)
  return page.page
}

const signIn = async (page: Page, token: string) => {
  await page.goto(`${hub.baseUrl}/dashboard`)
  await page.getByLabel("Token", { exact: true }).fill(token)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
  await page.getByRole("navigation", { name: "Pages" }).getByRole("link", { name: "Broadcasts" }).click()
  await page.getByRole("heading", { level: 1, name: "Broadcasts" }).waitFor()
}

/** The scheduled broadcast's people: more than one call's 1,000. */
const WEEKEND = 1_203

const PEOPLE = ["Ana", "Ben", "Chloé", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "June", "Kai"]

/** A CSV as a spreadsheet exports it: a header, then each person with their two body parameters. */
const csvOf = (rows: ReadonlyArray<readonly [string, string, string]>) =>
  ["to,name,order", ...rows.map((row) => row.map((cell) => (cell.includes(",") ? `"${cell}"` : cell)).join(","))]
    .join("\n")

/** `<input type="datetime-local">`'s value for an instant: local time, to the minute. */
const localInput = (at: Date) => {
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${
    pad(at.getMinutes())
  }`
}

describe("broadcasts in the dashboard", () => {
  it("creates a broadcast from a pasted CSV of an approved template and follows its progress, counts and failures", async () => {
    const page = await open()
    await signIn(page, hub.instanceToken)
    const queues = page.getByRole("table", { name: "Send queues by number" })
    const queue = queues.getByRole("row").filter({ hasText: "100000000000001" })
    await queue.locator("td[data-label='Pace']").getByText("messages/s").waitFor()
    await queue.locator("td[data-label='Sending now']").getByText("messages/s").waitFor()

    const form = page.getByRole("form", { name: "New broadcast" })
    await form.getByLabel("Name", { exact: true }).fill("Shipping notice")
    await form.getByLabel("Template", { exact: true }).selectOption({ label: "order_update (en_US, utility)" })
    await form.getByText("Columns after to: {{1}}, {{2}}.").waitFor()

    // A row without its second parameter and one that is not a number are named before anything is sent.
    const csv = form.getByLabel("Recipients (CSV)")
    await csv.fill("to,name,order\n16505550100,Ana\nnot-a-number,Ben,A-2")
    await form.getByText("Line 2: 1 parameter; the template takes 2").waitFor()
    await form.getByText(/^Line 3: “not-a-number” is neither a number/).waitFor()
    await form.getByRole("button", { name: "Create broadcast" }).click()
    await form.getByRole("alert").getByText("Fix the rows listed under the recipients first.").waitFor()

    const rows = PEOPLE.map((name, i) => [`+1 650 555 01${String(i).padStart(2, "0")}`, name, `A-${1042 + i}`] as const)
    await csv.fill(csvOf([...rows, [REFUSED, "Zed", "A-9, back-ordered"]]))
    await form.getByText("12 recipients read (the first row names the columns), each with 2 parameters.").waitFor()
    await form.getByRole("button", { name: "Create broadcast" }).click()

    // The broadcast's page: it goes out, each recipient with their own parameters.
    await page.getByRole("heading", { level: 1, name: /Shipping notice/ }).waitFor()
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop() ?? "")
    const progress = page.getByRole("region", { name: "Progress" })
    const count = (label: string) => progress.locator(".stats li").filter({ hasText: new RegExp(`^\\d+ ${label} `) })
    await count("read").getByText("11", { exact: true }).waitFor({ timeout: 30_000 })
    await count("failed").getByText("1", { exact: true }).waitFor()
    await page.getByRole("heading", { level: 1 }).getByText("completed").waitFor()

    // The chart was drawn from several readings, and says what it shows in words.
    const chart = progress.getByRole("img", { name: /Recipients of “Shipping notice” by status/ })
    await expect.poll(() => chart.locator("desc").textContent()).toContain("11 read, 1 failed")
    await progress.getByText("The samples as a table").click()
    const samples = progress.getByRole("table", { name: "Recipients by status at each reading, newest first" })
    expect(await samples.locator("tbody tr").count()).toBeGreaterThanOrEqual(3)
    expect(await samples.locator("tbody tr").first().locator("td").allTextContents()).toEqual([
      "0",
      "0",
      "0",
      "11",
      "1",
      "0"
    ])

    const failures = page.getByRole("region", { name: "Failures by reason" })
    await failures.getByRole("row").filter({ hasText: "refused" }).getByRole("cell", { name: "1", exact: true })
      .waitFor()
    const recipients = page.getByRole("region", { name: "Recipients", exact: true })
    await recipients.getByLabel("Status").selectOption("failed")
    await recipients.getByRole("link", { name: `Every message with ${REFUSED}` }).waitFor()
    // The list is read again when the counts change: wait for the filtered one to settle.
    await expect.poll(() => recipients.locator("tbody tr").count()).toBe(1)
    await recipients.getByLabel("Status").selectOption("")
    await recipients.getByRole("link", { name: "Every message with 16505550100" }).waitFor()
    await screenshot(page, "broadcast-detail", true)

    // Each person got the template with their own parameters (a number written with spaces, a quoted comma).
    const broadcast = record((await hub.api("GET", `/api/broadcasts/${id}`, hub.instanceToken)).body)
    expect(broadcast.counts).toMatchObject({ recipients: 12, read: 11, failed: 1 })
    const messages = await hub.api("GET", "/api/messages?limit=20", hub.instanceToken)
    const sent = (Array.isArray(record(messages.body).data) ? record(messages.body).data as Array<unknown> : [])
      .map(record)
    expect(sent.find((m) => m.to === "16505550100")).toBeDefined()
  })

  it("creates a scheduled broadcast with an organization token and cancels it from its page", async () => {
    const page = await open()
    await signIn(page, hub.organizationToken)
    await page.getByRole("link", { name: "Shipping notice" }).waitFor()
    const form = page.getByRole("form", { name: "New broadcast" })
    await form.getByLabel("Name", { exact: true }).fill("Weekend sale")
    await form.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
    await form.getByLabel("Template name").fill("order_update")
    await form.getByLabel("Language code").fill("en_US")
    // A file of a spreadsheet that writes semicolons, uploaded: its text lands in the field, read as CSV.
    // 1,203 people: the first 1,000 create the broadcast, the other 203 are added by a second call.
    const lines = Array.from({ length: WEEKEND }, (_, i) => `1650556${String(i).padStart(4, "0")};Lea;B-${i}`)
    await form.getByLabel("Or upload a CSV file").setInputFiles({
      name: "weekend.csv",
      mimeType: "text/csv",
      buffer: Buffer.from(`${lines.join("\r\n")}\r\n`)
    })
    await form.getByText("1,203 recipients read, each with 2 parameters.").waitFor()
    expect(await form.getByLabel("Recipients (CSV)").inputValue()).toContain("16505560001;Lea;B-1")
    const calls: Array<string> = []
    page.on("request", (request) => {
      if (request.method() === "POST") calls.push(new URL(request.url()).pathname)
    })
    await form.getByLabel("At a time (up to 35 days ahead)").check()
    await form.getByLabel(/^Send at/).fill(localInput(new Date(Date.now() + 3 * 3_600_000)))
    await form.getByLabel("Validity (seconds, optional)").fill("3600")
    await screenshot(page, "broadcasts", true)
    await form.getByRole("button", { name: "Create broadcast" }).click()

    await page.getByRole("heading", { level: 1, name: /Weekend sale/ }).waitFor()
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop() ?? "")
    await page.getByRole("heading", { level: 1 }).getByText("scheduled").waitFor()
    const progress = page.getByRole("region", { name: "Progress" })
    await progress.locator(".stats li").filter({ hasText: /^1,203 pending/ }).waitFor()
    expect(calls).toEqual(["/api/broadcasts", `/api/broadcasts/${id}/recipients`])

    await page.getByRole("button", { name: "Cancel broadcast" }).click()
    await page.getByRole("button", { name: "Cancel its unsent messages" }).click()
    await page.getByText("Broadcast cancelled: 1,203 sends taken off the queue.").waitFor()
    await page.getByRole("heading", { level: 1 }).getByText("cancelled").waitFor()
    expect(await page.getByRole("button", { name: "Cancel broadcast" }).count()).toBe(0)
    await page.getByRole("region", { name: "Failures by reason" }).getByRole("row").filter({ hasText: "cancelled" })
      .getByRole("cell", { name: "1,203", exact: true }).waitFor()
    const cancelled = record((await hub.api("GET", `/api/broadcasts/${id}`, hub.organizationToken)).body)
    expect(cancelled.status).toBe("cancelled")
    expect(cancelled.counts).toMatchObject({ recipients: WEEKEND, failed: WEEKEND, pending: 0 })

    await page.getByRole("link", { name: "← Broadcasts" }).click()
    const row = page.getByRole("row").filter({ hasText: "Weekend sale" })
    await row.getByText("cancelled").waitFor()
    await row.getByText("1,203 failed").waitFor()
  })
})
