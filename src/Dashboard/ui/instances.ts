/** The instances a page offers to choose among (to act for one, or to filter by one). */
import { call } from "./api.js"
import { useResource } from "./components.js"
import type { Instance, TokenKind } from "./types.js"

/** Organization tokens choose among their instances; an instance token always acts for its own. */
export const useInstances = (kind: TokenKind) =>
  useResource(
    async () =>
      kind === "organization"
        ? call<{ readonly data: ReadonlyArray<Instance> }>("GET", "/api/instances")
        : { ok: true, value: { data: [] } },
    kind
  )

/** The instances an organization token chooses among, once read; undefined for the other tokens, which choose none. */
export const useInstanceChoices = (kind: TokenKind): ReadonlyArray<Instance> | undefined => {
  const instances = useInstances(kind)
  return kind === "organization" && instances.loaded.state === "ready" ? instances.loaded.value.data : undefined
}
