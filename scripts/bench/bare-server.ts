/** The baseline: a bare Bun.serve answering GET /health like the hub. Prints its port. */
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: () => Response.json({ status: "ok" })
})
console.log(JSON.stringify({ port: server.port }))

export {}
