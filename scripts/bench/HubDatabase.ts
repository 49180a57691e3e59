/**
 * A database with the hub's schema, for the scripts that price statements without the hub
 * (pg-floor.ts, retention.ts): the hub is started once on it to run its migrations, then
 * stopped. Rows are written with every NOT NULL column the caller leaves out filled in.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startPostgres } from "../../test/support/PostgresServer.js"

export type Engine = "sqlite" | "postgres"

export interface HubDatabase {
  readonly engine: Engine
  readonly db: Bun.SQL
  /** Where it is (PostgreSQL's URL, SQLite's file), for a connection of the caller's own. */
  readonly url: string
  /** Closes the connections and removes the database (PostgreSQL's server stopped). */
  readonly stop: () => Promise<void>
}

/** Runs the hub once on `url` (the source's migrations, or `hub`'s: a built binary) and stops it. */
const migrate = async (url: string, hub: string | undefined) => {
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  const command = hub === undefined ? [process.execPath, "src/main.ts", "serve"] : [hub, "serve"]
  const process_ = Bun.spawn(command, {
    env: { ...process.env, PORT: String(port), HUB_DB: url, HUB_SECRET_KEY: randomBytes(32).toString("hex") },
    stdout: "ignore",
    stderr: "inherit"
  })
  let ready = false
  for (let i = 0; i < 300 && !ready; i++) {
    ready = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)
    if (!ready) await Bun.sleep(50)
  }
  process_.kill("SIGTERM")
  await process_.exited
  if (!ready) throw new Error(`the hub (${command.join(" ")}) did not start on ${url}`)
}

/** A migrated database of `engine`: PostgreSQL durable (each commit flushed), SQLite a file. */
export const hubDatabase = async (options: {
  readonly engine: Engine
  readonly hub?: string | undefined
  /** PostgreSQL's further settings, `name=value` each. */
  readonly settings?: ReadonlyArray<string>
  /**
   * PostgreSQL: the database's default collation, an ICU locale (`en-US`), as a database created
   * with a language's collation has (managed services default to `en_US.UTF-8`); else `C`.
   */
  readonly collation?: string | undefined
}): Promise<HubDatabase> => {
  if (options.engine === "postgres") {
    const pg = await startPostgres({ durable: true, maxConnections: 50, settings: [...(options.settings ?? [])] })
    let url = pg.urlOf("postgres")
    if (options.collation !== undefined) {
      const admin = new Bun.SQL({ url, max: 1 })
      await admin.unsafe(
        `CREATE DATABASE hub TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '${options.collation}' LOCALE 'C'`
      )
      await admin.close()
      url = pg.urlOf("hub")
    }
    await migrate(url, options.hub)
    const db = new Bun.SQL({ url, max: 4 })
    return {
      engine: "postgres",
      db,
      url,
      stop: async () => {
        await db.close()
        await pg.stop()
      }
    }
  }
  const dir = mkdtempSync(join(tmpdir(), "hub-db-"))
  const file = join(dir, "hub.db")
  await migrate(file, options.hub)
  const db = new Bun.SQL(`sqlite://${file}`)
  await db.unsafe("PRAGMA foreign_keys = ON")
  return {
    engine: "sqlite",
    db,
    url: file,
    stop: async () => {
      await db.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** The NOT NULL columns of `table` without a default, with whether each is text. */
const requiredColumns = async (
  { db, engine }: HubDatabase,
  table: string
): Promise<ReadonlyArray<{ readonly name: string; readonly text: boolean }>> => {
  if (engine === "postgres") {
    const rows: Array<{ column_name: string; data_type: string }> = await db.unsafe(
      `SELECT column_name, data_type FROM information_schema.columns
        WHERE table_name = $1 AND is_nullable = 'NO' AND column_default IS NULL`,
      [table]
    )
    return rows.map((c) => ({ name: c.column_name, text: c.data_type === "text" }))
  }
  const rows: Array<{ name: string; type: string; notnull: number; dflt_value: unknown; pk: number }> = await db
    .unsafe(`PRAGMA table_info(${table})`)
  return rows.filter((c) => c.notnull === 1 && c.dflt_value === null && c.pk === 0).map((c) => ({
    name: c.name,
    text: c.type.toUpperCase() === "TEXT"
  }))
}

/** Inserts a row of `table`: `given`, and every NOT NULL column without a default ("x" or 0). */
export const insertFilled = async (database: HubDatabase, table: string, given: Record<string, unknown>) => {
  const row: Record<string, unknown> = { ...given }
  for (const c of await requiredColumns(database, table)) row[c.name] ??= c.text ? "x" : 0
  const names = Object.keys(row)
  await database.db.unsafe(
    `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map((_, i) => `$${i + 1}`).join(", ")})`,
    names.map((n) => row[n])
  )
}

/** An organization (`org_1`) with one instance (`ins_1`) and a push webhook for each id of `webhooks`. */
export const seedWebhooks = async (database: HubDatabase, webhooks: ReadonlyArray<string>) => {
  await insertFilled(database, "organizations", { id: "org_1" })
  await insertFilled(database, "instances", {
    id: "ins_1",
    organization_id: "org_1",
    phone_number_id: "1",
    waba_id: "1"
  })
  for (const id of webhooks) {
    await insertFilled(database, "webhooks", {
      id,
      organization_id: "org_1",
      instance_id: "ins_1",
      active: 1,
      kind: "push"
    })
  }
}

/** PostgreSQL's CPU ticks by process role (its title: a backend's names its client, the others their work). */
export const cpuTicksByRole = () => {
  const byRole = new Map<string, number>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      if (!stat.includes("(postgres)")) continue
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const title = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ")
      const role = /autovacuum/.test(title)
        ? "autovacuum"
        : /postgres: (\S+ \S+ 127|\S+ \S+ \[local\])/.test(title) || /127\.0\.0\.1/.test(title)
        ? "backends"
        : title.replace(/^postgres: /, "").trim().split(" ").slice(0, 2).join(" ") || "postmaster"
      byRole.set(role, (byRole.get(role) ?? 0) + Number(fields[11]) + Number(fields[12]))
      // Processes ended meanwhile (autovacuum's workers, most often) count in their parent's children.
      const ended = Number(fields[13]) + Number(fields[14])
      if (ended > 0) byRole.set("ended processes", (byRole.get("ended processes") ?? 0) + ended)
    } catch {
      // gone meanwhile
    }
  }
  return byRole
}

/** PostgreSQL's CPU ticks, every role's. */
export const cpuTicks = () => [...cpuTicksByRole().values()].reduce((a, b) => a + b, 0)
