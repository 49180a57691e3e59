/**
 * A minimal Graph API stand-in: answers POST /v23.0/{phone}/messages, and GET /v23.0/{phone}?fields=throughput
 * with `{throughput: {level}}` (STANDARD unless the config names another: 80 messages/s a number). Prints its port.
 *
 * It records when each message post arrived (epoch ms, sub-millisecond), per phone number, and, for a
 * text whose body begins with "tx ", that body's arrival by itself (the queue scenario's transactional
 * sends, whose wait it measures). `GET /_bench/arrivals` answers `{arrivals: {phone: [ms…]}, marked:
 * {body: ms}, bodies, duplicates}` (`duplicates`: texts that arrived more than once), `GET /_bench/count`
 * `{count}`, and `POST /_bench/reset` forgets them.
 */
interface FakeConfig {
  readonly level?: string
}
const config: FakeConfig = JSON.parse(process.argv[2] ?? "{}")
const level = config.level ?? "STANDARD"

let sequence = 0
let arrivals = new Map<string, Array<number>>()
let marked = new Map<string, number>()
let seen = new Set<string>()
let duplicates = 0
const now = () => performance.timeOrigin + performance.now()

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const url = new URL(request.url)
    const send = /^\/v23\.0\/(\d+)\/messages$/.exec(url.pathname)
    if (request.method === "POST" && send !== null) {
      const at = now()
      const phone = send[1]!
      const body: { to?: string; text?: { body?: string } } = await request.json()
      sequence++
      const times = arrivals.get(phone)
      if (times === undefined) arrivals.set(phone, [at])
      else times.push(at)
      const text = body.text?.body
      if (text !== undefined) {
        if (seen.has(text)) duplicates++
        else seen.add(text)
        if (text.startsWith("tx ")) marked.set(text, at)
      }
      return Response.json({
        messaging_product: "whatsapp",
        contacts: [{ input: body.to ?? "", wa_id: body.to ?? "" }],
        messages: [{ id: `wamid.BENCH${sequence.toString(36).padStart(12, "0")}` }]
      })
    }
    const phone = /^\/v23\.0\/(\d+)$/.exec(url.pathname)
    if (request.method === "GET" && phone !== null && url.searchParams.get("fields") === "throughput") {
      return Response.json({ id: phone[1], throughput: { level } })
    }
    if (url.pathname === "/_bench/count") return Response.json({ count: sequence })
    if (url.pathname === "/_bench/arrivals") {
      return Response.json({
        arrivals: Object.fromEntries(arrivals),
        marked: Object.fromEntries(marked),
        bodies: seen.size,
        duplicates
      })
    }
    if (request.method === "POST" && url.pathname === "/_bench/reset") {
      sequence = 0
      arrivals = new Map()
      marked = new Map()
      seen = new Set()
      duplicates = 0
      return Response.json({})
    }
    return Response.json({ error: { message: "Unknown path", type: "OAuthException", code: 100, error_subcode: 33 } }, {
      status: 400
    })
  }
})
console.log(JSON.stringify({ port: server.port }))

export {}
