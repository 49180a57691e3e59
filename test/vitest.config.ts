import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    root: new URL("..", import.meta.url).pathname,
    include: ["test/**/*.test.ts"],
    reporters: ["default", "./test/support/SummaryReporter.ts"],
    // One PostgreSQL server for the run; tests on PostgreSQL each get a database of their own on it.
    globalSetup: ["./test/support/PostgresGlobalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Each file starts its own hubs on port 0; files run in parallel. Most of a file's time is spent
    // waiting (hubs, PostgreSQL, receivers, the signals it waits on), so four at once on the 2 cores:
    // the suite took 251 s against 392 with two (1,109 tests, 2026-11-27), CI's 10 minutes in mind.
    pool: "forks",
    maxWorkers: 4
  }
})
