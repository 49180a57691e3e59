/**
 * Sandbox mode on an empty database: a demo organization and instance, and tokens to try the hub
 * with at once. A restart finds the organization and creates nothing again.
 */
import { Console, Duration, Effect, Option } from "effect"
import { TokensRepo } from "./Auth/Repo.js"
import { HubConfig } from "./Config.js"
import { InstancesRepo } from "./Instances/Repo.js"

export const DEMO_PHONE_NUMBER_ID = "100000000000001"
export const DEMO_WABA_ID = "200000000000001"

export interface DemoCredentials {
  readonly organizationId: string
  readonly instanceId: string
  readonly sessionToken: string
  readonly organizationToken: string
  readonly instanceToken: string
}

/** Creates the demo tenancy when the database is empty and the upstream is the sandbox. */
export const bootstrapSandbox = Effect.gen(function*() {
  const config = yield* HubConfig
  const instances = yield* InstancesRepo
  const tokens = yield* TokensRepo
  if (config.upstream !== "sandbox" || (yield* instances.countOrganizations) > 0) return Option.none<DemoCredentials>()
  const organization = yield* instances.createOrganization("Demo organization")
  const instance = yield* instances.createInstance({
    organizationId: organization.id,
    name: "Demo instance",
    phoneNumberId: DEMO_PHONE_NUMBER_ID,
    wabaId: DEMO_WABA_ID,
    accessToken: Option.some("sandbox-access-token")
  }).pipe(Effect.orDie)
  const session = yield* tokens.createSession(organization.id, Duration.toMillis(config.sessionTtl))
  const orgToken = yield* tokens.createApiToken({ organizationId: organization.id, instanceId: undefined, name: "demo organization token" })
  const instanceToken = yield* tokens.createApiToken({ organizationId: organization.id, instanceId: instance.id, name: "demo instance token" })
  return Option.some<DemoCredentials>({
    organizationId: organization.id,
    instanceId: instance.id,
    sessionToken: session.secret,
    organizationToken: orgToken.secret,
    instanceToken: instanceToken.secret
  })
})

export const printDemoCredentials = (demo: DemoCredentials, baseUrl: string) =>
  Console.log(
    [
      "",
      "Sandbox ready: a demo organization and instance were created. These secrets are shown only now.",
      `  organization id   ${demo.organizationId}`,
      `  instance id       ${demo.instanceId}`,
      `  session token     ${demo.sessionToken}`,
      `  org token         ${demo.organizationToken}`,
      `  instance token    ${demo.instanceToken}`,
      "",
      "Try it:",
      `  curl -s ${baseUrl}/api/instances -H "Authorization: Bearer ${demo.organizationToken}"`,
      ""
    ].join("\n")
  )
