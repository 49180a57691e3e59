/** A webhook's settings: its name and URL, whether it is active, its signing secret, and deleting it. */
import { useEffect, useState } from "preact/hooks"
import { call } from "../../api.js"
import { ConfirmButton, ErrorNote, Outcome, SecretOnce, Time, useAction } from "../../components.js"
import { navigate } from "../../router.js"
import type { Rotated, Webhook } from "../../types.js"
import type { SectionProps } from "./SectionProps.js"

interface WebhookChanges {
  readonly name?: string
  readonly url?: string
  readonly active?: boolean
  readonly ordering?: Webhook["ordering"]
}

/** The name and URL, edited; only what changed is saved. */
const NameAndUrlForm = (props: { readonly webhook: Webhook; readonly onSave: (changes: WebhookChanges) => void }) => {
  const { webhook } = props
  const [name, setName] = useState(webhook.name)
  const [url, setUrl] = useState(webhook.url)
  const [ordering, setOrdering] = useState(webhook.ordering)
  useEffect(() => {
    setName(webhook.name)
    setUrl(webhook.url)
    setOrdering(webhook.ordering)
  }, [webhook.updated_at])
  const unchanged = name === webhook.name && url === webhook.url && ordering === webhook.ordering
  return (
    <form
      class="stack"
      aria-label="Edit the webhook"
      onSubmit={(event) => {
        event.preventDefault()
        props.onSave({
          ...(name === webhook.name ? {} : { name }),
          ...(url === webhook.url ? {} : { url }),
          ...(ordering === webhook.ordering ? {} : { ordering })
        })
      }}
    >
      <div class="row">
        <div class="field">
          <label for="edit-name">Name</label>
          <input
            id="edit-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </div>
        {webhook.kind === "poll" ? null : (
          <div class="field wide">
            <label for="edit-url">URL</label>
            <input id="edit-url" type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
          </div>
        )}
        {webhook.kind === "poll" ? null : (
          <div class="field">
            <label for="edit-ordering">Order of deliveries</label>
            <select
              id="edit-ordering"
              aria-describedby="edit-ordering-help"
              value={ordering}
              onChange={(e) => setOrdering(e.currentTarget.value === "per_contact" ? "per_contact" : "none")}
            >
              <option value="none">As they come</option>
              <option value="per_contact">One person at a time, in order</option>
            </select>
            <p id="edit-ordering-help" class="help">
              In order, a person's next delivery waits until the one before succeeded or was given up.
            </p>
          </div>
        )}
      </div>
      <div>
        <button type="submit" disabled={unchanged}>Save changes</button>
      </div>
    </form>
  )
}

export const Settings = (props: SectionProps) => {
  const { webhook } = props
  const [rotated, setRotated] = useState<Rotated | undefined>(undefined)
  const { error, outcome, run } = useAction()

  const patch = (changes: WebhookChanges, done: string) =>
    run(() => call<Webhook>("PATCH", `/api/webhooks/${webhook.id}`, { json: changes }), (record) => {
      props.onChanged(record)
      return done
    })
  const rotate = () =>
    run(() => call<Rotated>("POST", `/api/webhooks/${webhook.id}/rotate-secret`), (answer) => {
      setRotated(answer)
      return "A new signing secret was made."
    })
  const remove = () =>
    run(() => call<void>("DELETE", `/api/webhooks/${webhook.id}`), () => {
      navigate("/webhooks")
      return undefined
    })

  return (
    <div class="stack">
      <NameAndUrlForm webhook={webhook} onSave={(changes) => void patch(changes, "Saved.")} />
      <div class="actions-row">
        {webhook.active
          ? (
            <button
              type="button"
              class="secondary"
              onClick={() => void patch({ active: false }, "Deactivated: no new deliveries are queued.")}
            >
              Deactivate
            </button>
          )
          : (
            <button
              type="button"
              onClick={() => void patch({ active: true }, "Activated: new events are delivered again.")}
            >
              Activate
            </button>
          )}
        <ConfirmButton
          label="Rotate secret"
          confirmLabel="Make a new secret"
          question="Replace the signing secret? The old one keeps signing for 24 hours."
          tone="normal"
          onConfirm={rotate}
        />
        <ConfirmButton
          label="Delete webhook"
          confirmLabel="Delete for good"
          question={`Delete “${webhook.name}” and cancel its queued deliveries?`}
          onConfirm={remove}
        />
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Refused:" />
      {rotated === undefined ?
        null :
        (
          <SecretOnce title="The new signing secret" secret={rotated.secret} onDone={() => setRotated(undefined)}>
            <p class="muted">
              Deliveries carry both signatures until <Time iso={rotated.previous_secret_expires_at} />.
            </p>
          </SecretOnce>
        )}
    </div>
  )
}
