/**
 * Vitest's global setup: ONE PostgreSQL server for the whole run (see PostgresServer.ts); each hub a
 * test starts on PostgreSQL gets a database of its own on it (Databases.ts). If the server cannot
 * start, the run fails here with the server's reason: no test is skipped for it.
 * HUB_TEST_POSTGRES_URL (the `postgres` database of another server, as a user who may create
 * databases) runs the same tests on that server instead, to try another PostgreSQL version.
 */
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** The server's `postgres` database URL, as the superuser: tests create their databases through it. */
    readonly postgresAdminUrl: string
  }
}

export default async function setup(project: TestProject) {
  const given = process.env.HUB_TEST_POSTGRES_URL
  if (given !== undefined && given !== "") {
    project.provide("postgresAdminUrl", given)
    return async () => {}
  }
  const { startPostgres } = await import("./PostgresServer.js")
  const server = await startPostgres()
  project.provide("postgresAdminUrl", server.urlOf("postgres"))
  return async () => {
    await server.stop()
  }
}
