/** A minimal Graph API stand-in for the send path: answers POST /v23.0/{phone}/messages. Prints its port. */
let sequence = 0
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const url = new URL(request.url)
    if (request.method === "POST" && /^\/v23\.0\/\d+\/messages$/.test(url.pathname)) {
      const body: { to?: string } = await request.json()
      sequence++
      return Response.json({
        messaging_product: "whatsapp",
        contacts: [{ input: body.to ?? "", wa_id: body.to ?? "" }],
        messages: [{ id: `wamid.BENCH${sequence.toString(36).padStart(12, "0")}` }]
      })
    }
    return Response.json({ error: { message: "Unknown path", type: "OAuthException", code: 100, error_subcode: 33 } }, {
      status: 400
    })
  }
})
console.log(JSON.stringify({ port: server.port }))

export {}
