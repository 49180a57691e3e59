/**
 * Broadcasts: the send queue of each number (refreshed while the page is open), a form that creates a
 * broadcast of an approved template to the people of a CSV (each with their own body parameters),
 * and the list of broadcasts with their counts.
 */
import { useMemo, useState } from "preact/hooks"
import { type ApiError, type ApiResult, call } from "../api.js"
import {
  Badge,
  ErrorNote,
  isoOfLocalInput,
  localZone,
  PageTitle,
  Resource,
  Time,
  usePolling,
  useResource
} from "../components.js"
import { useInstanceChoices } from "../instances.js"
import {
  bodyParametersOf,
  chunksOf,
  type ReadRecipients,
  readRecipients,
  RECIPIENTS_PER_BROADCAST,
  RECIPIENTS_PER_CALL
} from "../recipients.js"
import { Link, navigate } from "../router.js"
import { can } from "../session.js"
import type {
  Broadcast,
  Broadcasts,
  Instance,
  NewBroadcast,
  RecipientsAdded,
  TemplateRecord,
  TokenKind
} from "../types.js"
import { broadcastTone, numbers } from "./broadcasts/display.js"
import { SendQueuesSection } from "./broadcasts/SendQueues.js"

const POLL_MS = 5_000

/** The approved templates of the instance's business account (GET /templates, every page). */
const approvedTemplates = async (): Promise<ApiResult<ReadonlyArray<TemplateRecord>>> => {
  const found: Array<TemplateRecord> = []
  let after: string | undefined
  for (let page = 0; page < 10; page++) {
    const answer = await call<{
      readonly data: ReadonlyArray<TemplateRecord>
      readonly paging?: { readonly cursors?: { readonly after?: string }; readonly next?: unknown }
    }>("GET", "/templates", { query: { status: "APPROVED", limit: 100, after } })
    if (!answer.ok) return answer
    found.push(...answer.value.data.filter((t) => t.status === undefined || t.status === "APPROVED"))
    after = answer.value.paging?.cursors?.after
    if (after === undefined || answer.value.paging?.next === undefined) break
  }
  return { ok: true, value: found }
}

const templateKey = (t: TemplateRecord) => `${t.name ?? ""}|${t.language ?? ""}`

const bodyText = (template: TemplateRecord) => {
  const body = (template.components ?? []).find((c) => String(c.type).toUpperCase() === "BODY")
  return typeof body?.text === "string" ? body.text : undefined
}

const SAMPLE = "to,name,order\n16505550101,Ana,A-1042\n16505550102,Ben,A-1043"

/** What the CSV holds, before anything is sent: how many people, and each row's problem. */
const CsvSummary = (props: { readonly read: ReadRecipients }) => {
  const { problems, recipients } = props.read
  return (
    <div id="csv-summary" aria-live="polite">
      <p class={problems.length === 0 ? "note note-ok" : "note note-warn"}>
        {numbers.format(recipients.length)} {recipients.length === 1 ? "recipient" : "recipients"} read
        {props.read.header ? " (the first row names the columns)" : ""}, each with {props.read.parameters}{" "}
        {props.read.parameters === 1 ? "parameter" : "parameters"}
        {problems.length === 0 ? "." : `; ${problems.length} ${problems.length === 1 ? "row" : "rows"} to fix:`}
      </p>
      {problems.length === 0 ? null : (
        <ul class="problems">
          {problems.slice(0, 10).map((p) => <li key={p.line}>Line {p.line}: {p.message}</li>)}
          {problems.length > 10 ? <li>and {problems.length - 10} more</li> : null}
        </ul>
      )}
    </div>
  )
}

/** Sends the recipients in calls of 1,000: the first creates the broadcast, the others add to it; a 429 or 503 is waited out. */
const createInChunks = async (
  base: Omit<NewBroadcast, "recipients">,
  recipients: NewBroadcast["recipients"],
  progress: (added: number) => void
): Promise<{ readonly broadcast?: Broadcast; readonly added: number; readonly error?: ApiError }> => {
  const chunks = chunksOf(recipients, RECIPIENTS_PER_CALL)
  const withRetries = async <A extends unknown>(attempt: () => Promise<ApiResult<A>>) => {
    for (let tries = 1;; tries++) {
      const result = await attempt()
      if (result.ok || tries >= 5 || (result.error.status !== 429 && result.error.status !== 503)) return result
      progress(-1)
      await new Promise((resolve) => setTimeout(resolve, 1000 * Math.min(60, result.error.retryAfterSeconds ?? 5)))
    }
  }
  const [first, ...rest] = chunks
  if (first === undefined) return { added: 0 }
  const created = await withRetries(() =>
    call<Broadcast>("POST", "/api/broadcasts", { json: { ...base, recipients: first } })
  )
  if (!created.ok) return { added: 0, error: created.error }
  let added = first.length
  progress(added)
  for (const chunk of rest) {
    const more = await withRetries(() =>
      call<RecipientsAdded>("POST", `/api/broadcasts/${encodeURIComponent(created.value.id)}/recipients`, {
        json: { recipients: chunk }
      })
    )
    if (!more.ok) return { broadcast: created.value, added, error: more.error }
    added += chunk.length
    progress(added)
  }
  return { broadcast: created.value, added }
}

const NewBroadcastForm = (props: {
  readonly kind: TokenKind
  readonly instances: ReadonlyArray<Instance> | undefined
  readonly onCreated: () => void
}) => {
  // Templates are listed for instance tokens only (GET /templates); an organization token names one.
  const listed = can.listTemplates(props.kind)
  const templates = useResource(
    async (): Promise<ApiResult<ReadonlyArray<TemplateRecord>>> =>
      listed ? approvedTemplates() : { ok: true, value: [] },
    `templates-${props.kind}`
  )
  const [name, setName] = useState("")
  const [instanceId, setInstanceId] = useState("")
  const [chosen, setChosen] = useState("")
  const [typedName, setTypedName] = useState("")
  const [typedLanguage, setTypedLanguage] = useState("en_US")
  const [csv, setCsv] = useState("")
  const [when, setWhen] = useState<"now" | "later">("now")
  const [sendAt, setSendAt] = useState("")
  const [validity, setValidity] = useState("")
  const [busy, setBusy] = useState(false)
  const [progress, setProgress] = useState<string | undefined>(undefined)
  const [error, setError] = useState<ApiError | undefined>(undefined)

  const choices = templates.loaded.state === "ready" ? templates.loaded.value : []
  const template = listed ? choices.find((t) => templateKey(t) === chosen) : undefined
  const parameters = useMemo(() => (template === undefined ? undefined : bodyParametersOf(template)), [template])
  // Read again only when the CSV or the template changes (up to 100,000 rows; the list above refreshes every few seconds).
  const read = useMemo(() => (csv.trim() === "" ? undefined : readRecipients(csv, parameters)), [csv, parameters])
  const templateName = listed ? template?.name ?? "" : typedName.trim()
  const language = listed ? template?.language ?? "" : typedLanguage.trim()

  const loadFile = async (event: { readonly currentTarget: HTMLInputElement }) => {
    const file = event.currentTarget.files?.[0]
    if (file !== undefined) setCsv(await file.text())
  }

  const refuse = (message: string) => setError({ status: 0, code: undefined, message })

  const submit = async (event: Event) => {
    event.preventDefault()
    setError(undefined)
    if (templateName === "" || language === "") return refuse("Choose the template to send.")
    if (read !== undefined && read.problems.length > 0) {
      return refuse("Fix the rows listed under the recipients first.")
    }
    if (read === undefined || read.recipients.length === 0) return refuse("Add the recipients: paste or upload a CSV.")
    const at = when === "later" ? isoOfLocalInput(sendAt) : undefined
    if (when === "later" && at === undefined) return refuse("Give the date and time to send at.")
    const base: Omit<NewBroadcast, "recipients"> = {
      name: name.trim(),
      template: { name: templateName, language: { code: language } },
      ...(at === undefined ? {} : { send_at: at }),
      ...(validity.trim() === "" ? {} : { validity: Number(validity) }),
      ...(instanceId === "" ? {} : { instance_id: instanceId })
    }
    const total = read.recipients.length
    setBusy(true)
    setProgress(`Creating the broadcast with ${numbers.format(Math.min(total, RECIPIENTS_PER_CALL))} recipients…`)
    const outcome = await createInChunks(base, read.recipients, (added) =>
      setProgress(
        added < 0
          ? "The hub asked to wait (its queue is full): trying again shortly…"
          : `Added ${numbers.format(added)} of ${numbers.format(total)} recipients…`
      ))
    setBusy(false)
    setProgress(undefined)
    if (outcome.broadcast === undefined) return setError(outcome.error)
    props.onCreated()
    const id = encodeURIComponent(outcome.broadcast.id)
    if (outcome.error !== undefined) {
      setError({
        ...outcome.error,
        message: `Broadcast “${outcome.broadcast.name}” was created with ${numbers.format(outcome.added)} of ${
          numbers.format(total)
        } recipients; adding the rest failed: ${outcome.error.message}`
      })
      return
    }
    navigate(`/broadcasts/${id}`)
  }

  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="new-broadcast-title">
      <h2 id="new-broadcast-title">New broadcast</h2>
      <div class="row">
        <div class="field">
          <label for="b-name">Name</label>
          <input
            id="b-name"
            required
            maxLength={200}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </div>
        {props.instances === undefined ? null : (
          <div class="field">
            <label for="b-instance">Instance</label>
            <select id="b-instance" required value={instanceId} onChange={(e) => setInstanceId(e.currentTarget.value)}>
              <option value="">Choose the number to send from</option>
              {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
      </div>
      {listed
        ? (
          <div class="field">
            <label for="b-template">Template</label>
            <Resource loaded={templates.loaded} what="the approved templates">
              {(list) => (
                <select
                  id="b-template"
                  required
                  value={chosen}
                  onChange={(e) => setChosen(e.currentTarget.value)}
                  aria-describedby="b-template-help"
                >
                  <option value="">
                    {list.length === 0 ? "No approved template yet" : "Choose an approved template"}
                  </option>
                  {list.map((t) => (
                    <option key={templateKey(t)} value={templateKey(t)}>
                      {t.name} ({t.language}
                      {t.category === undefined ? "" : `, ${String(t.category).toLowerCase()}`})
                    </option>
                  ))}
                </select>
              )}
            </Resource>
            <p id="b-template-help" class="help">
              {template === undefined
                ? "Only approved templates can be sent."
                : (
                  <>
                    {bodyText(template) === undefined ? null : <>“{bodyText(template)}” ·{" "}</>}
                    {parameters?.names.length === 0
                      ? "It takes no parameters: the CSV needs the to column only."
                      : `Columns after to: ${parameters?.names.map((n) => `{{${n}}}`).join(", ")}.`}
                  </>
                )}
            </p>
            {parameters !== undefined && parameters.elsewhere.length > 0
              ? (
                <p class="note note-warn">
                  This template also takes parameters in{" "}
                  {parameters.elsewhere.join(" and ")}, which a CSV cannot give: Meta would refuse its sends.
                </p>
              )
              : null}
          </div>
        )
        : (
          <div class="row">
            <div class="field wide">
              <label for="b-template-name">Template name</label>
              <input
                id="b-template-name"
                class="mono"
                required
                pattern="[a-z0-9_]{1,512}"
                aria-describedby="b-template-name-help"
                value={typedName}
                onInput={(e) => setTypedName(e.currentTarget.value)}
              />
              <p id="b-template-name-help" class="help">
                An approved template of the instance's business account. Templates are listed for instance tokens only:
                sign in with one to choose from them.
              </p>
            </div>
            <div class="field">
              <label for="b-template-language">Language code</label>
              <input
                id="b-template-language"
                class="mono"
                required
                value={typedLanguage}
                onInput={(e) => setTypedLanguage(e.currentTarget.value)}
              />
            </div>
          </div>
        )}
      <div class="field">
        <label for="b-csv">Recipients (CSV)</label>
        <textarea
          id="b-csv"
          class="mono"
          rows={6}
          spellcheck={false}
          placeholder={SAMPLE}
          aria-describedby="b-csv-help csv-summary"
          value={csv}
          onInput={(e) => setCsv(e.currentTarget.value)}
        />
        <p id="b-csv-help" class="help">
          One person a row: <code>to</code>{" "}
          first (a number, or a business-scoped user id), then one column per body parameter in the template's order. A
          first row of column names is skipped; a paste from a spreadsheet works too. The same person twice is sent
          once. Up to {numbers.format(RECIPIENTS_PER_BROADCAST)} recipients, sent to the hub{" "}
          {numbers.format(RECIPIENTS_PER_CALL)} at a time.
        </p>
      </div>
      <div class="field inline">
        <label for="b-file">Or upload a CSV file</label>
        <input id="b-file" type="file" accept=".csv,.tsv,.txt,text/csv" onChange={loadFile} />
      </div>
      {read === undefined ? null : <CsvSummary read={read} />}
      <fieldset>
        <legend>When</legend>
        <div class="choices">
          <div class="check">
            <input
              id="b-now"
              type="radio"
              name="b-when"
              checked={when === "now"}
              onChange={() => setWhen("now")}
            />
            <label for="b-now">Now</label>
          </div>
          <div class="check">
            <input
              id="b-later"
              type="radio"
              name="b-when"
              checked={when === "later"}
              onChange={() => setWhen("later")}
            />
            <label for="b-later">At a time (up to 35 days ahead)</label>
          </div>
        </div>
      </fieldset>
      <div class="row">
        {when === "later"
          ? (
            <div class="field">
              <label for="b-send-at">Send at ({localZone()})</label>
              <input
                id="b-send-at"
                type="datetime-local"
                required
                value={sendAt}
                onInput={(e) => setSendAt(e.currentTarget.value)}
              />
            </div>
          )
          : null}
        <div class="field">
          <label for="b-validity">Validity (seconds, optional)</label>
          <input
            id="b-validity"
            type="number"
            min={1}
            max={36000}
            step={1}
            aria-describedby="b-validity-help"
            value={validity}
            onInput={(e) => setValidity(e.currentTarget.value)}
          />
          <p id="b-validity-help" class="help">
            How long each send may wait for its turn; the hub's default when empty.
          </p>
        </div>
      </div>
      <ErrorNote error={error} prefix="Not sent:" />
      <p class="muted" role="status">{progress ?? ""}</p>
      <div>
        <button type="submit" disabled={busy}>{busy ? "Creating…" : "Create broadcast"}</button>
      </div>
    </form>
  )
}

/** One line of counts: "12 sent · 3 delivered · 1 failed". */
const countsSummary = (counts: Broadcast["counts"]) => {
  const parts = (["pending", "sent", "delivered", "read", "failed", "skipped"] as const)
    .filter((key) => counts[key] > 0)
    .map((key) => `${numbers.format(counts[key])} ${key}`)
  return parts.length === 0 ? "—" : parts.join(" · ")
}

const BroadcastList = (props: { readonly list: Broadcasts }) => (
  <div class="table-wrap">
    <table class="responsive">
      <caption class="visually-hidden">Broadcasts, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Status</th>
          <th scope="col">Template</th>
          <th scope="col">Recipients</th>
          <th scope="col">Progress</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {props.list.data.map((b) => (
          <tr key={b.id}>
            <td data-label="Name">
              <Link to={`/broadcasts/${encodeURIComponent(b.id)}`}>{b.name}</Link>
            </td>
            <td data-label="Status">
              <Badge tone={broadcastTone(b.status)}>{b.status}</Badge>
              {b.status === "scheduled" && b.send_at !== null
                ? (
                  <span class="small muted">
                    {" "}for <Time iso={b.send_at} />
                  </span>
                )
                : null}
            </td>
            <td data-label="Template" class="mono">{b.template.name} ({b.template.language.code})</td>
            <td data-label="Recipients">{numbers.format(b.counts.recipients)}</td>
            <td data-label="Progress">{countsSummary(b.counts)}</td>
            <td data-label="Created">
              <Time iso={b.created_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
    {props.list.data.length === 0 ? <p class="muted">No broadcasts yet.</p> : null}
  </div>
)

export const BroadcastsPage = (props: { readonly kind: TokenKind }) => {
  const instances = useInstanceChoices(props.kind)
  const broadcasts = useResource(() => call<Broadcasts>("GET", "/api/broadcasts"), "broadcasts")
  usePolling(true, broadcasts.reload, POLL_MS, broadcasts.loaded)
  return (
    <main id="main">
      <PageTitle lead="One approved template to many people, each with their own parameters, paced to each number's limits.">
        Broadcasts
      </PageTitle>
      <SendQueuesSection instances={instances} pollMs={POLL_MS} />
      <section aria-labelledby="list-title">
        <div class="toolbar">
          <h2 id="list-title">Recent broadcasts</h2>
          <button type="button" class="secondary" onClick={() => void broadcasts.reload()}>Refresh</button>
        </div>
        <Resource loaded={broadcasts.loaded} what="the broadcasts">
          {(list) => <BroadcastList list={list} />}
        </Resource>
      </section>
      <section>
        <NewBroadcastForm kind={props.kind} instances={instances} onCreated={() => void broadcasts.reload()} />
      </section>
    </main>
  )
}
