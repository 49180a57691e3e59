/**
 * Sandbox mode on an empty database: a demo organization and instance, and tokens to try the hub
 * with at once. A restart finds the organization, creates nothing again, and says in one line how
 * to get new tokens (the first ones were shown only once).
 */
import { Console, Duration, Effect, Option } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { TokensRepo } from "../ApiTokens/Repo.js"
import { databaseEngine, HubConfig } from "../Config.js"
import { InstancesRepo } from "../Instances/Repo.js"

export const DEMO_PHONE_NUMBER_ID = "100000000000001"
export const DEMO_WABA_ID = "200000000000001"

export interface DemoCredentials {
  readonly organizationId: string
  readonly instanceId: string
  readonly sessionToken: string
  readonly organizationToken: string
  readonly instanceToken: string
}

/** What the sandbox found at start: nothing (not the sandbox), a new demo tenancy, or the organization made before. */
export type SandboxStart =
  | { readonly _tag: "NotSandbox" }
  | { readonly _tag: "Created"; readonly demo: DemoCredentials }
  | { readonly _tag: "Existing"; readonly organizationId: string }

/** Creates the demo tenancy when the database is empty and the upstream is the sandbox. */
export const bootstrapSandbox: Effect.Effect<SandboxStart, never, HubConfig | InstancesRepo | TokensRepo> = Effect.gen(
  function*() {
    const config = yield* HubConfig
    const instances = yield* InstancesRepo
    const tokens = yield* TokensRepo
    if (config.upstream !== "sandbox") return { _tag: "NotSandbox" } as const
    const [first] = yield* instances.listOrganizations
    if (first !== undefined) return { _tag: "Existing", organizationId: first.id } as const
    const organization = yield* instances.createOrganization("Demo organization")
    const instance = yield* instances.createInstance({
      organizationId: organization.id,
      name: "Demo instance",
      phoneNumberId: DEMO_PHONE_NUMBER_ID,
      wabaId: DEMO_WABA_ID,
      accessToken: Option.some("sandbox-access-token")
    }).pipe(Effect.orDie)
    const session = yield* tokens.createSession(organization.id, Duration.toMillis(config.sessionTtl))
    const orgToken = yield* tokens.createApiToken({
      organizationId: organization.id,
      instanceId: undefined,
      name: "demo organization token"
    })
    const instanceToken = yield* tokens.createApiToken({
      organizationId: organization.id,
      instanceId: instance.id,
      name: "demo instance token"
    })
    const demo: DemoCredentials = {
      organizationId: organization.id,
      instanceId: instance.id,
      sessionToken: session.secret,
      organizationToken: orgToken.secret,
      instanceToken: instanceToken.secret
    }
    return { _tag: "Created", demo } as const
  }
)

/** A restart's one line: the tokens were shown once, so how to get new ones for the first (demo) organization. */
export const printNewTokensHint = (organizationId: string) =>
  Console.log(
    `Sandbox: organization ${organizationId} exists (its tokens were shown at its first start); for new ones run ` +
      `\`hub session create --org ${organizationId}\` or \`hub token create --org ${organizationId} --name NAME\` (\`hub org list\` lists organizations)`
  )

/** Where the API's documentation is: the start banner's last line. */
export const printDocsLine = (baseUrl: string) =>
  Console.log(`API docs: ${baseUrl}/docs (Swagger UI); the OpenAPI document: ${baseUrl}/openapi.json`)

/** The demo's secrets, as shown once. */
const credentialLines = (demo: DemoCredentials) => [
  `  organization id   ${demo.organizationId}`,
  `  instance id       ${demo.instanceId}`,
  `  session token     ${demo.sessionToken}`,
  `  org token         ${demo.organizationToken}`,
  `  instance token    ${demo.instanceToken}`
]

/** Where the demo's tokens are written when standard output is not a terminal: beside a SQLite file, or a private temporary folder. */
const demoTokensFile = (databaseFile: string) =>
  join(
    databaseEngine(databaseFile) === "sqlite" && databaseFile !== ":memory:"
      ? dirname(databaseFile)
      : mkdtempSync(join(tmpdir(), "hub-demo-")),
    "demo-tokens.txt"
  )

/**
 * The demo's tokens, shown once. On a terminal they are printed; otherwise standard output is a log
 * stream (a container's, a journal's) that others read and keep, so they are written once to a file
 * only the hub's user can read, and only its path is printed.
 */
export const printDemoCredentials = (
  demo: DemoCredentials,
  baseUrl: string,
  databaseFile: string,
  terminal: boolean = process.stdout.isTTY === true
) =>
  Effect.suspend(() => {
    if (terminal) {
      return Console.log(
        [
          "",
          "Sandbox ready: a demo organization and instance were created. These secrets are shown only now.",
          ...credentialLines(demo),
          "",
          "Try it:",
          `  curl -s ${baseUrl}/api/instances -H "Authorization: Bearer ${demo.organizationToken}"`,
          ""
        ].join("\n")
      )
    }
    const file = demoTokensFile(databaseFile)
    // A file left from a database since deleted holds dead tokens; the new one is created afresh, so
    // its mode is 0600 whatever the old one's was ("wx": never written through a file put there meanwhile).
    rmSync(file, { force: true })
    writeFileSync(
      file,
      [
        ...credentialLines(demo),
        `  try it: curl -s ${baseUrl}/api/instances -H "Authorization: Bearer <org token>"`,
        ""
      ].join("\n"),
      {
        mode: 0o600,
        flag: "wx"
      }
    )
    return Console.log(
      `Sandbox ready: a demo organization (${demo.organizationId}) and instance (${demo.instanceId}) were created. ` +
        `Standard output is not a terminal, so their tokens are kept out of it: they were written once to ${file} (readable by this user only)`
    )
  })
