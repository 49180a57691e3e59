/**
 * The test PostgreSQL starts wherever the clone lives: binaries in a folder other users cannot enter
 * (root's home is 0700) are copied where the server's user can read them; and when it truly cannot
 * start, the error says why and what to do.
 */
import { expect, it } from "@effect/vitest"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { packagedBinaries, startPostgres } from "./support/PostgresServer.js"

it("starts from binaries inside a folder only its owner may enter, and answers a query", async () => {
  const closed = mkdtempSync(join(tmpdir(), "hub-closed-clone-"))
  try {
    // mkdtemp makes it 0700: like a clone in root's home, no other user may enter it.
    const binaries = join(closed, "node_modules", "native")
    cpSync(packagedBinaries(), binaries, { recursive: true, verbatimSymlinks: true })
    const server = await startPostgres({ binaries, maxConnections: 10 })
    try {
      const client = new pg.Client({ connectionString: server.urlOf("postgres") })
      await client.connect()
      const { rows } = await client.query<{ readonly answer: number }>("SELECT 40 + 2 AS answer")
      await client.end()
      expect(rows).toEqual([{ answer: 42 }])
    } finally {
      await server.stop()
    }
  } finally {
    rmSync(closed, { recursive: true, force: true })
  }
}, 60_000)

it("when it cannot start, says why and what to do", async () => {
  const error = await startPostgres({ binaries: join(tmpdir(), "no-postgres-here") }).then(
    () => undefined,
    (e: unknown) => e
  )
  expect(error).toBeInstanceOf(Error)
  const message = error instanceof Error ? error.message : ""
  expect(message).toMatch(/^PostgreSQL for the tests could not (copy its binaries|initialise its data directory)/)
  expect(message).toContain("no-postgres-here")
  expect(message).toContain("HUB_TEST_POSTGRES_URL")
})
