/**
 * Posts signed upstream status events to the hub at a fixed offered rate, from its own process.
 * Usage: bun scripts/bench/post-events.ts '<json config>' → one JSON line of results.
 * Config: { url, urls?, appSecret, rate (events/s), seconds, numbers: [{ phoneNumberId, wabaId }], maxInFlight?, persons? }
 * With persons, the statuses go to that many recipients in turn (post n to person n % persons, named
 * by BSUID as well as number); without, all to one number.
 * With urls (hub replicas), posts go to each in turn, as a load balancer would spread them.
 * Posts go over kept-alive connections, one per post in flight (the hub's own webhook sender):
 * Bun's fetch keeps at most 64 idle sockets, and beyond that would open a connection per post,
 * measuring TCP handshakes on both sides rather than the hub.
 */
import { createHmac } from "node:crypto"
import { makeSender, NoAnswer } from "../../src/Delivery/Sender.js"

interface PostConfig {
  readonly url: string
  readonly urls?: ReadonlyArray<string>
  readonly appSecret: string
  readonly rate: number
  readonly seconds: number
  readonly numbers: ReadonlyArray<{ readonly phoneNumberId: string; readonly wabaId: string }>
  readonly maxInFlight?: number
  readonly persons?: number
}

const config: PostConfig = JSON.parse(process.argv[2] ?? "{}")
const maxInFlight = config.maxInFlight ?? 256
const sender = makeSender({ maxIdlePerOrigin: maxInFlight, maxPerOrigin: maxInFlight })
const targets = (config.urls ?? [config.url]).map((url) => ({
  url,
  hostHeader: new URL(url).host,
  serverName: undefined
}))
// The hub answers every post; no per-post timer (60,000 of them would pile up each second in overload).
const never = new AbortController().signal
let sent = 0
let ok = 0
let errors = 0
let inFlight = 0
let dropped = 0

const recipientOf = (n: number) =>
  config.persons === undefined
    ? { recipient_id: "15551234567" }
    : { recipient_id: String(15550000000 + (n % config.persons)), recipient_user_id: `US.${n % config.persons}` }

const payload = (n: number) => {
  const number = config.numbers[n % config.numbers.length]!
  const now = Date.now()
  return JSON.stringify({
    object: "whatsapp_business_account",
    entry: [{
      id: number.wabaId,
      changes: [{
        field: "messages",
        value: {
          messaging_product: "whatsapp",
          metadata: { display_phone_number: "15550000000", phone_number_id: number.phoneNumberId },
          statuses: [{
            id: `wamid.bench.${now}.${n}`,
            status: "sent",
            timestamp: String(Math.floor(now / 1000)),
            ...recipientOf(n)
          }]
        }
      }]
    }]
  })
}

const post = async (n: number) => {
  const body = payload(n)
  const signature = createHmac("sha256", config.appSecret).update(body).digest("hex")
  inFlight++
  try {
    const answer = await sender.send({
      target: targets[n % targets.length]!,
      headers: { "content-type": "application/json", "x-hub-signature-256": `sha256=${signature}` },
      body,
      timeoutMs: 60_000,
      signal: never
    })
    if (!(answer instanceof NoAnswer) && answer.status === 200) ok++
    else errors++
  } catch {
    errors++
  } finally {
    inFlight--
  }
}

const started = performance.now()
const pending: Array<Promise<void>> = []
while (performance.now() - started < config.seconds * 1000) {
  const due = Math.floor(((performance.now() - started) / 1000) * config.rate)
  while (sent < due) {
    // An open-loop generator: when the hub falls behind, requests beyond the cap are counted as dropped.
    if (inFlight >= maxInFlight) {
      dropped += due - sent
      sent = due
      break
    }
    pending.push(post(sent))
    sent++
  }
  await Bun.sleep(1)
}
await Promise.all(pending)
sender.close()
const elapsed = (performance.now() - started) / 1000
console.log(
  JSON.stringify({
    offered: sent,
    posted: sent - dropped,
    ok,
    errors,
    dropped,
    seconds: elapsed,
    acceptedRate: ok / elapsed
  })
)
