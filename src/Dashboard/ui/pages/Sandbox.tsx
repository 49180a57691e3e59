import { useState } from "preact/hooks"
import { inboundMessageTypes } from "../../../Domain/Vocabulary.js"
import { call } from "../api.js"
import { ErrorNote, Outcome, PageTitle, useAction } from "../components.js"
import { SIMULATED_FIELDS } from "../eventKinds.js"
import { useInstanceChoices } from "../instances.js"
import { Link } from "../router.js"
import type { ChangesSimulated, Inbound, Instance, TokenKind } from "../types.js"

/** The most changes one simulated post holds (POST /sandbox/changes). */
const MAX_CHANGES = 20

interface ChangeRow {
  readonly key: number
  readonly field: string
  readonly value: string
}

let nextChange = 0
const newChange = (field = "account_update", value = "{}"): ChangeRow => ({ key: nextChange++, field, value })

const parseObject = (text: string): Record<string, unknown> | undefined => {
  try {
    const parsed: unknown = JSON.parse(text === "" ? "{}" : text)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? { ...parsed } : undefined
  } catch {
    return undefined
  }
}

/** One change: its field and its value (a JSON object), and a button to remove it. */
const ChangeFields = (props: {
  readonly row: ChangeRow
  /** Its place in the list, from 1. */
  readonly number: number
  readonly removable: boolean
  readonly onChange: (change: Partial<ChangeRow>) => void
  readonly onRemove: () => void
}) => {
  const { row, number } = props
  return (
    <li class="change-row">
      <div class="field">
        <label for={`change-field-${row.key}`}>Change {number} field</label>
        <select
          id={`change-field-${row.key}`}
          value={row.field}
          onChange={(e) => props.onChange({ field: e.currentTarget.value })}
        >
          {SIMULATED_FIELDS.map((field) => <option key={field} value={field}>{field}</option>)}
        </select>
      </div>
      <div class="field wide">
        <label for={`change-value-${row.key}`}>Change {number} value (JSON)</label>
        <textarea
          id={`change-value-${row.key}`}
          class="mono"
          rows={2}
          spellcheck={false}
          value={row.value}
          onInput={(e) => props.onChange({ value: e.currentTarget.value })}
        />
      </div>
      <button
        type="button"
        class="danger-outline"
        disabled={!props.removable}
        aria-label={`Remove change ${number}`}
        onClick={props.onRemove}
      >
        Remove
      </button>
    </li>
  )
}

/**
 * Changes of any kind, posted by the sandbox upstream as one envelope for the instance's number
 * (POST /sandbox/changes): to watch webhooks' event filters at work without a Meta account.
 */
const SimulateChanges = (props: { readonly instances: ReadonlyArray<Instance> | undefined }) => {
  const [rows, setRows] = useState<ReadonlyArray<ChangeRow>>(() => [newChange()])
  const [instanceId, setInstanceId] = useState("")
  const { error, outcome, busy, run, setError, setOutcome } = useAction()
  const update = (key: number, change: Partial<ChangeRow>) =>
    setRows(rows.map((row) => (row.key === key ? { ...row, ...change } : row)))

  const submit = async (event: Event) => {
    event.preventDefault()
    setError(undefined)
    setOutcome(undefined)
    const changes = rows.map((row, index) => ({ index, field: row.field, value: parseObject(row.value.trim()) }))
    const bad = changes.find((change) => change.value === undefined)
    if (bad !== undefined) {
      return setError({
        status: 0,
        code: undefined,
        message: `The value of change ${bad.index + 1} must be a JSON object, such as {"event": "VERIFIED_ACCOUNT"}.`
      })
    }
    const json = {
      changes: changes.map(({ field, value }) => ({ field, value })),
      ...(instanceId === "" ? {} : { instance_id: instanceId })
    }
    return run(
      () => call<ChangesSimulated>("POST", "/sandbox/changes", { json }),
      ({ accepted, deliveries }) =>
        `${accepted} ${accepted === 1 ? "change" : "changes"} accepted: ${deliveries} webhook ${
          deliveries === 1 ? "delivery" : "deliveries"
        } queued.`
    )
  }

  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="changes-title">
      <h2 id="changes-title">Simulate upstream changes</h2>
      <p class="help">
        Posted as one upstream envelope for the instance's number, each change with its field and value, as Meta would
        post it. Webhooks that take some kinds receive only those changes.
      </p>
      {props.instances === undefined ? null : (
        <div class="field narrow">
          <label for="changes-instance">Instance</label>
          <select
            id="changes-instance"
            required
            value={instanceId}
            onChange={(e) => setInstanceId(e.currentTarget.value)}
          >
            <option value="">Choose…</option>
            {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
          </select>
        </div>
      )}
      <ol class="change-rows">
        {rows.map((row, index) => (
          <ChangeFields
            key={row.key}
            row={row}
            number={index + 1}
            removable={rows.length > 1}
            onChange={(change) => update(row.key, change)}
            onRemove={() => setRows(rows.filter((r) => r.key !== row.key))}
          />
        ))}
      </ol>
      <div class="actions-row">
        <button
          type="button"
          class="secondary"
          disabled={rows.length >= MAX_CHANGES}
          onClick={() => setRows([...rows, newChange("phone_number_quality_update")])}
        >
          Add a change
        </button>
        <span class="help">{rows.length} of {MAX_CHANGES}.</span>
      </div>
      <ErrorNote error={error} prefix="Not simulated:" />
      <Outcome text={outcome} />
      <div>
        <button type="submit" disabled={busy}>{busy ? "Simulating…" : "Simulate changes"}</button>
      </div>
    </form>
  )
}

/** A customer's message to one of the numbers, posted by the sandbox upstream (POST /sandbox/inbound). */
const SimulateInbound = (props: { readonly instances: ReadonlyArray<Instance> | undefined }) => {
  const [from, setFrom] = useState("16505551234")
  const [name, setName] = useState("")
  const [type, setType] = useState("text")
  const [body, setBody] = useState("Hello from the sandbox")
  const [instanceId, setInstanceId] = useState("")
  const { error, outcome, busy, run } = useAction()

  const submit = (event: Event) => {
    event.preventDefault()
    const json = {
      from,
      type,
      ...(name.trim() === "" ? {} : { name }),
      ...(type === "text" ? { text: { body } } : {}),
      ...(instanceId === "" ? {} : { instance_id: instanceId })
    }
    void run(
      () => call<Inbound>("POST", "/sandbox/inbound", { json }),
      (inbound) =>
        `Simulated ${inbound.id}: ${inbound.deliveries} webhook ${
          inbound.deliveries === 1 ? "delivery" : "deliveries"
        } queued.`
    )
  }

  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="inbound-title">
      <h2 id="inbound-title">Simulate an inbound message</h2>
      <div class="row">
        <div class="field">
          <label for="sandbox-from">From (the customer's number)</label>
          <input
            id="sandbox-from"
            required
            inputMode="tel"
            pattern="\+?\d{6,20}"
            value={from}
            onInput={(e) => setFrom(e.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="sandbox-name">Profile name (optional)</label>
          <input id="sandbox-name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="sandbox-type">Type</label>
          <select id="sandbox-type" value={type} onChange={(e) => setType(e.currentTarget.value)}>
            {inboundMessageTypes.map((t) => <option key={t} value={t}>{t}</option>)}
          </select>
        </div>
        {props.instances === undefined ? null : (
          <div class="field">
            <label for="sandbox-instance">Instance</label>
            <select
              id="sandbox-instance"
              required
              value={instanceId}
              onChange={(e) => setInstanceId(e.currentTarget.value)}
            >
              <option value="">Choose…</option>
              {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
      </div>
      {type === "text" ?
        (
          <div class="field">
            <label for="sandbox-body">Text</label>
            <textarea
              id="sandbox-body"
              required
              maxLength={4096}
              rows={3}
              value={body}
              onInput={(e) => setBody(e.currentTarget.value)}
            />
          </div>
        ) :
        <p class="help">The sandbox fills in the {type} content with plausible values.</p>}
      <ErrorNote error={error} prefix="Not simulated:" />
      <Outcome text={outcome} />
      <div>
        <button type="submit" disabled={busy}>{busy ? "Simulating…" : "Simulate inbound message"}</button>
      </div>
    </form>
  )
}

export const SandboxPage = (props: { readonly kind: TokenKind }) => {
  const choices = useInstanceChoices(props.kind)
  return (
    <main id="main">
      <PageTitle lead="The sandbox stands in for Meta's platform: simulate a customer's message to one of your numbers, or changes of any kind.">
        Sandbox
      </PageTitle>
      <SimulateInbound instances={choices} />
      <SimulateChanges instances={choices} />
      <p>
        Both arrive like real ones: shown in <Link to="/events">Live events</Link> and delivered to the instance's{" "}
        <Link to="/webhooks">webhooks</Link>; inbound messages are recorded in <Link to="/messages">Messages</Link> too.
      </p>
    </main>
  )
}
