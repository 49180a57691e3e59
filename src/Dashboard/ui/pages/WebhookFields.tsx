/**
 * The parts of a webhook's forms the create form and the webhook's page share: the kinds of change
 * it takes (`events`) and its custom headers (`headers`), each as the API takes them.
 */
import { useLayoutEffect, useState } from "preact/hooks"
import type { MAX_HEADERS, REDACTED } from "../../../Webhooks/CustomHeaders.js"
import { ALL_KINDS, FIELD_KINDS, inKindOrder, kindDescription, MESSAGE_KINDS, takesEveryKind } from "../eventKinds.js"

/** The hub's limit and placeholder (the type checks they are the hub's values). */
const HEADER_LIMIT: typeof MAX_HEADERS = 10
const REDACTED_VALUE: typeof REDACTED = "[redacted]"

export interface KindsChoice {
  readonly every: boolean
  readonly chosen: ReadonlySet<string>
}

export const EVERY_KIND: KindsChoice = { every: true, chosen: new Set() }

export const choiceOf = (events: ReadonlyArray<string>): KindsChoice =>
  takesEveryKind(events) ? EVERY_KIND : { every: false, chosen: new Set(events) }

/** The `events` the API takes for a choice: ["*"] for every kind. */
export const eventsOf = (
  choice: KindsChoice
): ReadonlyArray<string> => (choice.every ? [ALL_KINDS] : inKindOrder(choice.chosen))

export const sameEvents = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) =>
  [...a].sort().join(",") === [...b].sort().join(",")

/** The kinds a webhook takes: all of them (kinds Meta adds later included), or those chosen. */
export const EventKindsField = (
  props: { readonly id: string; readonly value: KindsChoice; readonly onChange: (choice: KindsChoice) => void }
) => {
  const { id, value } = props
  const toggle = (kind: string, on: boolean) => {
    const chosen = new Set(value.chosen)
    if (on) chosen.add(kind)
    else chosen.delete(kind)
    props.onChange({ every: false, chosen })
  }
  const box = (kind: string, described: boolean) => (
    <li key={kind} class="check">
      <input
        type="checkbox"
        id={`${id}-${kind}`}
        checked={value.chosen.has(kind)}
        aria-describedby={described ? `${id}-${kind}-help` : undefined}
        onChange={(e) => toggle(kind, e.currentTarget.checked)}
      />
      <label for={`${id}-${kind}`} class="mono">{kind}</label>
      {described ? <span id={`${id}-${kind}-help`} class="help">{kindDescription(kind)}</span> : null}
    </li>
  )
  return (
    <fieldset class="kinds">
      <legend>Events it receives</legend>
      <div class="choices">
        <div class="check">
          <input
            type="radio"
            id={`${id}-every`}
            name={`${id}-scope`}
            checked={value.every}
            onChange={() => props.onChange({ every: true, chosen: value.chosen })}
          />
          <label for={`${id}-every`}>All kinds</label>
          <span class="help">every change of the instance, kinds Meta adds later included</span>
        </div>
        <div class="check">
          <input
            type="radio"
            id={`${id}-some`}
            name={`${id}-scope`}
            checked={!value.every}
            onChange={() => props.onChange({ every: false, chosen: value.chosen })}
          />
          <label for={`${id}-some`}>Only the kinds chosen</label>
          <span class="help">
            a delivery holds only their changes, each unaltered; an event with none makes no delivery
          </span>
        </div>
      </div>
      {value.every ? null : (
        <div class="kind-groups">
          <fieldset class="kind-group">
            <legend>Messages</legend>
            <ul class="kind-list">{MESSAGE_KINDS.map((kind) => box(kind, true))}</ul>
          </fieldset>
          <fieldset class="kind-group">
            <legend>Other changes</legend>
            <p class="help">Each is the upstream's change field of that name.</p>
            <ul class="kind-list kind-grid">{FIELD_KINDS.map((kind) => box(kind, false))}</ul>
          </fieldset>
          <p class="help">
            {value.chosen.size === 0
              ? "No kind chosen yet."
              : `${value.chosen.size} chosen: ${inKindOrder(value.chosen).join(", ")}.`}
          </p>
        </div>
      )}
    </fieldset>
  )
}

export interface HeaderRow {
  readonly key: number
  readonly name: string
  readonly value: string
  /** A secret header as the API shows it: its value is not known here. */
  readonly redacted: boolean
}

let nextRow = 0
const newRow = (name = "", value = "", redacted = false): HeaderRow => ({ key: nextRow++, name, value, redacted })

/** The rows of a record's headers; a secret one shows the API's placeholder. */
export const rowsOf = (headers: Readonly<Record<string, string>>): ReadonlyArray<HeaderRow> =>
  Object.entries(headers).map(([name, value]) => newRow(name, value, value === REDACTED_VALUE))

/** The `headers` object the API takes (rows with neither name nor value left out). */
export const headersOf = (rows: ReadonlyArray<HeaderRow>): Readonly<Record<string, string>> =>
  Object.fromEntries(
    rows.filter((row) => row.name.trim() !== "" || row.value !== "").map((row) => [row.name.trim(), row.value])
  )

/** One header's name and value (a secret one's value redacted, with a button to replace it) and a button to remove it. */
const HeaderFields = (props: {
  /** The id of the field the row is in: its inputs' ids start with it. */
  readonly id: string
  readonly row: HeaderRow
  /** Its place in the list, from 0. */
  readonly index: number
  readonly onChange: (change: Partial<HeaderRow>) => void
  readonly onReplace: () => void
  readonly onRemove: () => void
}) => {
  const { id, row, index } = props
  const which = `Header ${index + 1} `
  // On a wide screen the first row's labels head the columns; the others' are read out, not shown again.
  const shown = index === 0 ? undefined : "repeat-label"
  return (
    <li class="header-row">
      <div class="field">
        <label for={`${id}-name-${row.key}`} class={shown}>
          <span class="visually-hidden">{which}</span>Name
        </label>
        <input
          id={`${id}-name-${row.key}`}
          class="mono"
          autoComplete="off"
          spellcheck={false}
          maxLength={64}
          placeholder="x-tenant"
          value={row.name}
          onInput={(e) => props.onChange({ name: e.currentTarget.value })}
        />
      </div>
      <div class="field">
        <label for={`${id}-value-${row.key}`} class={shown}>
          <span class="visually-hidden">{which}</span>Value
        </label>
        {row.redacted
          ? (
            <div class="redacted">
              <input id={`${id}-value-${row.key}`} class="mono" readOnly value={REDACTED_VALUE} />
              <button
                type="button"
                class="secondary"
                aria-label={`Replace the value of ${row.name}`}
                onClick={props.onReplace}
              >
                Replace
              </button>
            </div>
          )
          : (
            <input
              id={`${id}-value-${row.key}`}
              class="mono"
              autoComplete="off"
              spellcheck={false}
              maxLength={1024}
              value={row.value}
              onInput={(e) => props.onChange({ value: e.currentTarget.value })}
            />
          )}
      </div>
      <button
        type="button"
        class="danger-outline"
        aria-label={`Remove header ${index + 1}${row.name === "" ? "" : ` (${row.name})`}`}
        onClick={props.onRemove}
      >
        Remove
      </button>
    </li>
  )
}

/** Up to HEADER_LIMIT name and value pairs; a secret one's value is shown redacted until replaced. */
export const HeadersField = (props: {
  readonly id: string
  readonly rows: ReadonlyArray<HeaderRow>
  readonly onChange: (rows: ReadonlyArray<HeaderRow>) => void
  /** Under a heading that says it already. */
  readonly legendHidden?: boolean
}) => {
  const { id, rows } = props
  // The field to focus after adding a row or replacing a secret value (its id), as soon as it is drawn
  // (before the next key press reaches the button that drew it).
  const [focus, setFocus] = useState<string | undefined>(undefined)
  useLayoutEffect(() => {
    if (focus === undefined) return
    document.getElementById(focus)?.focus()
    setFocus(undefined)
  }, [focus])
  const update = (key: number, change: Partial<HeaderRow>) =>
    props.onChange(rows.map((row) => (row.key === key ? { ...row, ...change } : row)))
  const add = () => {
    const row = newRow()
    props.onChange([...rows, row])
    setFocus(`${id}-name-${row.key}`)
  }
  const remove = (key: number) => {
    props.onChange(rows.filter((row) => row.key !== key))
    setFocus(`${id}-add`)
  }
  return (
    <fieldset class="headers-field">
      <legend class={props.legendHidden === true ? "visually-hidden" : undefined}>Custom headers</legend>
      <p class="help">
        Sent with every delivery, at most{" "}
        {HEADER_LIMIT}. Headers named like secrets (authorization, cookie, or with token, secret, key, password, auth,
        session or credential in the name) are stored encrypted and shown as <code>{REDACTED_VALUE}</code>.
      </p>
      {rows.length === 0 ? null : (
        <ul class="header-rows">
          {rows.map((row, index) => (
            <HeaderFields
              key={row.key}
              id={id}
              row={row}
              index={index}
              onChange={(change) => update(row.key, change)}
              onReplace={() => {
                update(row.key, { redacted: false, value: "" })
                setFocus(`${id}-value-${row.key}`)
              }}
              onRemove={() => remove(row.key)}
            />
          ))}
        </ul>
      )}
      <div class="actions-row">
        <button type="button" id={`${id}-add`} class="secondary" disabled={rows.length >= HEADER_LIMIT} onClick={add}>
          Add a header
        </button>
        <span class="help">{rows.length === 0 ? "None." : `${rows.length} of ${HEADER_LIMIT}.`}</span>
      </div>
    </fieldset>
  )
}
