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
    // Each file starts its own hubs on port 0; files run in parallel on the 2 cores.
    pool: "forks"
  }
})
