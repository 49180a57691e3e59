/**
 * Meta's Graph API versions and when each stops being served (Meta's changelog; research §6), so the
 * hub can say at start when the configured one ends soon or has ended. v26.0 has no end date yet.
 */
import { Effect } from "effect"

/** The last day each version is served (inclusive), as Meta announces it. */
const GRAPH_VERSION_ENDS: Readonly<Record<string, string>> = {
  "v18.0": "2026-01-26",
  "v19.0": "2026-05-21",
  "v20.0": "2026-09-24",
  "v21.0": "2027-01-21",
  "v22.0": "2027-05-20",
  "v23.0": "2027-10-08",
  "v24.0": "2028-02-18",
  "v25.0": "2028-07-29"
}

/** How long before a version's end the hub starts warning about it. */
const WARN_BEFORE_DAYS = 90

/** The `vNN.N` version a Graph base URL names (its last path segment), if it names one. */
export const graphVersionOf = (graphUrl: string): string | undefined => /\/(v\d+\.\d+)\/?$/.exec(graphUrl)?.[1]

/**
 * What to tell the operator about the configured version at `now`: nothing while it has more than
 * WARN_BEFORE_DAYS left (or no known end), else how long it has, or that it has ended.
 */
export const versionWarning = (graphUrl: string, now: Date): string | undefined => {
  const version = graphVersionOf(graphUrl)
  const end = version === undefined ? undefined : GRAPH_VERSION_ENDS[version]
  if (version === undefined || end === undefined) return undefined
  const daysLeft = Math.floor((Date.parse(`${end}T23:59:59Z`) - now.getTime()) / 86_400_000)
  if (daysLeft > WARN_BEFORE_DAYS) return undefined
  return daysLeft < 0
    ? `HUB_GRAPH_URL names Graph API ${version}, which Meta stopped serving after ${end}: calls will be refused; move to v25.0 or later`
    : `HUB_GRAPH_URL names Graph API ${version}, which Meta serves until ${end} (${daysLeft} days): move to v25.0 or later`
}

/** Logs the start-up warning about the configured version, if there is one. */
export const warnAboutGraphVersion = (graphUrl: string) =>
  Effect.suspend(() => {
    const warning = versionWarning(graphUrl, new Date())
    return warning === undefined ? Effect.void : Effect.logWarning(warning)
  })
