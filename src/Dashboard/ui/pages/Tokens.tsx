import { useState } from "preact/hooks"
import { type ApiError, call } from "../api.js"
import {
  Badge,
  ConfirmButton,
  ErrorNote,
  Outcome,
  PageTitle,
  Resource,
  SecretOnce,
  Time,
  useAction,
  useResource
} from "../components.js"
import { can } from "../session.js"
import type { Instance, TokenCreated, TokenKind, TokenList, TokenSummary } from "../types.js"

const instanceName = (instances: ReadonlyArray<Instance>, id: string | undefined) => {
  if (id === undefined) return "All instances"
  const instance = instances.find((i) => i.id === id)
  return instance === undefined ? id : `${instance.name} (${instance.phone_number_id})`
}

const CreateToken = (
  props: { readonly instances: ReadonlyArray<Instance>; readonly onCreated: (token: TokenCreated) => void }
) => {
  const [name, setName] = useState("")
  const [instanceId, setInstanceId] = useState("")
  const { error, busy, run } = useAction()
  const submit = (event: Event) => {
    event.preventDefault()
    void run(
      () =>
        call<TokenCreated>("POST", "/api/auth/api-tokens", {
          json: instanceId === "" ? { name } : { name, instance_id: instanceId }
        }),
      (created) => {
        setName("")
        setInstanceId("")
        props.onCreated(created)
        return undefined
      }
    )
  }
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="create-token-title">
      <h2 id="create-token-title">Create a token</h2>
      <div class="row">
        <div class="field">
          <label for="token-name">Name</label>
          <input
            id="token-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="token-instance">Instance</label>
          <select
            id="token-instance"
            value={instanceId}
            onChange={(e) => setInstanceId(e.currentTarget.value)}
            aria-describedby="token-instance-help"
          >
            <option value="">None: an organization token</option>
            {props.instances.map((instance) => (
              <option key={instance.id} value={instance.id}>{instance.name} ({instance.phone_number_id})</option>
            ))}
          </select>
          <p id="token-instance-help" class="help">An instance token acts for that instance only.</p>
        </div>
      </div>
      <ErrorNote error={error} prefix="Not created:" />
      <div>
        <button type="submit" disabled={busy}>{busy ? "Creating…" : "Create token"}</button>
      </div>
    </form>
  )
}

const TokenRows = (props: {
  readonly tokens: ReadonlyArray<TokenSummary>
  readonly instances: ReadonlyArray<Instance>
  readonly current: string
  readonly onRevoke: (token: TokenSummary) => Promise<void>
}) => (
  <div class="table-wrap">
    <table class="responsive">
      <caption class="visually-hidden">API tokens of the organization</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Kind</th>
          <th scope="col">Instance</th>
          <th scope="col">Starts with</th>
          <th scope="col">Created</th>
          <th scope="col">Last used</th>
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {props.tokens.map((token) => (
          <tr key={token.id}>
            <td data-label="Name">
              <strong>{token.name}</strong>
              {props.current.startsWith(token.token_hint.replace("…", ""))
                ? (
                  <>
                    {" "}
                    <Badge tone="info">signed in with it</Badge>
                  </>
                )
                : null}
            </td>
            <td data-label="Kind">{token.kind}</td>
            <td data-label="Instance">{instanceName(props.instances, token.instance_id)}</td>
            <td data-label="Starts with" class="mono">{token.token_hint}</td>
            <td data-label="Created">
              <Time iso={token.created_at} />
            </td>
            <td data-label="Last used">
              <Time iso={token.last_used_at} />
            </td>
            <td data-label="Actions" class="actions">
              <ConfirmButton
                label="Revoke"
                confirmLabel="Revoke token"
                question={`Revoke “${token.name}”?`}
                onConfirm={() => props.onRevoke(token)}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
    {props.tokens.length === 0 ? <p class="muted">No api tokens yet.</p> : null}
  </div>
)

export const TokensPage = (props: { readonly kind: TokenKind; readonly token: string }) => {
  const tokens = useResource(() => call<TokenList>("GET", "/api/auth/api-tokens"), "tokens")
  const instances = useResource(
    () => call<{ readonly data: ReadonlyArray<Instance> }>("GET", "/api/instances"),
    "instances"
  )
  const [created, setCreated] = useState<TokenCreated | undefined>(undefined)
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const knownInstances = instances.loaded.state === "ready" ? instances.loaded.value.data : []

  const revoke = async (token: TokenSummary) => {
    setError(undefined)
    const result = await call<void>("DELETE", `/api/auth/api-tokens/${token.id}`)
    if (!result.ok) return setError(result.error)
    setOutcome(`Token “${token.name}” revoked: the hub refuses it from now on.`)
    await tokens.reload()
  }

  return (
    <main id="main">
      <PageTitle lead="Tokens for the API: organization tokens reach every instance, instance tokens one. Secrets are shown once, when created.">
        API tokens
      </PageTitle>
      {can.createTokens(props.kind)
        ? created === undefined
          ? (
            <CreateToken
              instances={knownInstances}
              onCreated={(token) => {
                setCreated(token)
                setOutcome(`Token “${token.name}” created.`)
                void tokens.reload()
              }}
            />
          )
          : (
            <SecretOnce
              title={`The secret of “${created.name}”`}
              secret={created.token}
              onDone={() => setCreated(undefined)}
            >
              <p class="muted">
                {created.instance_id === undefined
                  ? "An organization token."
                  : `An instance token for ${instanceName(knownInstances, created.instance_id)}.`}
              </p>
            </SecretOnce>
          )
        : (
          <p class="note note-info">
            Creating tokens needs a session token (<code>hub session create</code>); this token may list and revoke
            them.
          </p>
        )}
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Not revoked:" />
      <section aria-labelledby="token-list-title">
        <h2 id="token-list-title">Tokens</h2>
        <Resource loaded={tokens.loaded} what="the tokens">
          {(list) => (
            <TokenRows
              tokens={list.data}
              instances={knownInstances}
              current={props.token}
              onRevoke={revoke}
            />
          )}
        </Resource>
      </section>
    </main>
  )
}
