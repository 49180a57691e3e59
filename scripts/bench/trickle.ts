/**
 * A trickle of transactional queued sends at a fixed rate (open loop), while a bulk backlog drains: each
 * POST /api/messages with `Prefer: respond-async` and no priority (transactional, the default), the text
 * "tx <i>", from the numbers in turn, each to its own person. Records when each 202 arrived (epoch ms,
 * the clock the fake upstream stamps arrivals with), so the caller can measure each send's wait.
 * Usage: bun scripts/bench/trickle.ts '<json config>'  →  prints one JSON line.
 * Config: { url, token, phoneNumberIds, rate, seconds }
 */
interface TrickleConfig {
  readonly url: string
  readonly token: string
  readonly phoneNumberIds: ReadonlyArray<string>
  readonly rate: number
  readonly seconds: number
}

const config: TrickleConfig = JSON.parse(process.argv[2] ?? "{}")
const now = () => performance.timeOrigin + performance.now()
const accepted: Record<string, number> = {}
const statuses = new Map<number, number>()
const refusals: Array<string> = []
let errors = 0

const send = async (i: number) => {
  const text = `tx ${i}`
  try {
    const response = await fetch(config.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${config.token}`,
        prefer: "respond-async"
      },
      body: JSON.stringify({
        phone_number_id: config.phoneNumberIds[i % config.phoneNumberIds.length],
        to: String(16_660_000_000 + i),
        type: "text",
        text: { body: text }
      })
    })
    const answer = await response.text()
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
    if (response.status === 202) accepted[text] = now()
    else if (refusals.length < 5) refusals.push(`${response.status} ${answer.slice(0, 300)}`)
  } catch (error) {
    errors++
    if (refusals.length < 5) refusals.push(String(error))
  }
}

const started = performance.now()
const count = Math.max(1, Math.round(config.rate * config.seconds))
const inFlight: Array<Promise<void>> = []
for (let i = 0; i < count; i++) {
  const at = started + (i * 1000) / config.rate
  const wait = at - performance.now()
  if (wait > 0) await Bun.sleep(wait)
  inFlight.push(send(i))
}
await Promise.all(inFlight)
console.log(JSON.stringify({ requests: count, errors, statuses: Object.fromEntries(statuses), refusals, accepted }))

export {}
