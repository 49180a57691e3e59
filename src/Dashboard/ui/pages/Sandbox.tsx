import { useState } from "preact/hooks"
import { type ApiError, call } from "../api.js"
import { ErrorNote, Outcome, PageTitle } from "../components.js"
import { Link } from "../router.js"
import type { Inbound, TokenKind } from "../types.js"
import { useInstances } from "./Webhooks.js"

/** The inbound message types of the sandbox; the content of those other than text gets plausible values there. */
const TYPES = ["text", "image", "document", "audio", "video", "sticker", "location", "contacts", "interactive", "reaction", "order"]

export const SandboxPage = (props: { readonly kind: TokenKind }) => {
  const instances = useInstances(props.kind)
  const [from, setFrom] = useState("16505551234")
  const [name, setName] = useState("")
  const [type, setType] = useState("text")
  const [body, setBody] = useState("Hello from the sandbox")
  const [instanceId, setInstanceId] = useState("")
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const choices = props.kind === "organization" && instances.loaded.state === "ready" ? instances.loaded.value.data : undefined

  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    setOutcome(undefined)
    const result = await call<Inbound>("POST", "/sandbox/inbound", {
      json: {
        from,
        type,
        ...(name.trim() === "" ? {} : { name }),
        ...(type === "text" ? { text: { body } } : {}),
        ...(instanceId === "" ? {} : { instance_id: instanceId })
      }
    })
    setBusy(false)
    if (!result.ok) return setError(result.error)
    setOutcome(`Simulated ${result.value.id}: ${result.value.deliveries} webhook ${result.value.deliveries === 1 ? "delivery" : "deliveries"} queued.`)
  }

  return (
    <main id="main">
      <PageTitle lead="The sandbox stands in for Meta's platform: simulate a customer's message to one of your numbers.">Sandbox</PageTitle>
      <form class="card stack" onSubmit={submit} aria-label="Simulate an inbound message">
        <div class="row">
          <div class="field">
            <label for="sandbox-from">From (the customer's number)</label>
            <input id="sandbox-from" required inputMode="tel" pattern="\+?\d{6,20}" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
          </div>
          <div class="field">
            <label for="sandbox-name">Profile name (optional)</label>
            <input id="sandbox-name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </div>
          <div class="field">
            <label for="sandbox-type">Type</label>
            <select id="sandbox-type" value={type} onChange={(e) => setType(e.currentTarget.value)}>
              {TYPES.map((t) => <option key={t} value={t}>{t}</option>)}
            </select>
          </div>
          {choices === undefined ? null : (
            <div class="field">
              <label for="sandbox-instance">Instance</label>
              <select id="sandbox-instance" required value={instanceId} onChange={(e) => setInstanceId(e.currentTarget.value)}>
                <option value="">Choose…</option>
                {choices.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
              </select>
            </div>
          )}
        </div>
        {type === "text" ? (
          <div class="field">
            <label for="sandbox-body">Text</label>
            <textarea id="sandbox-body" required maxLength={4096} rows={3} value={body} onInput={(e) => setBody(e.currentTarget.value)} />
          </div>
        ) : <p class="help">The sandbox fills in the {type} content with plausible values.</p>}
        <ErrorNote error={error} prefix="Not simulated:" />
        <Outcome text={outcome} />
        <div><button type="submit" disabled={busy}>{busy ? "Simulating…" : "Simulate inbound message"}</button></div>
      </form>
      <p>
        It arrives like a real one: recorded in <Link to="/messages">Messages</Link>, shown in <Link to="/events">Live events</Link>, and delivered
        to the instance's <Link to="/webhooks">webhooks</Link>.
      </p>
    </main>
  )
}
