/**
 * The form that creates a broadcast: its name and number, an approved template, the people of a CSV
 * (each with their own body parameters), and when it goes out.
 */
import { useMemo, useState } from "preact/hooks"
import type { ApiResult } from "../../api.js"
import { ErrorNote, useResource } from "../../components.js"
import { bodyParametersOf, readRecipients } from "../../recipients.js"
import { can } from "../../session.js"
import type { Instance, TemplateRecord, TokenKind } from "../../types.js"
import { useBroadcastCreation } from "./creation.js"
import { RecipientsInput } from "./RecipientsInput.js"
import { ListedTemplateField, TypedTemplateFields } from "./TemplateFields.js"
import { approvedTemplates, templateKey } from "./templates.js"
import { TimingFields, type When } from "./TimingFields.js"

/** The broadcast's name, and the number it is sent from where the token can choose one. */
const NameAndInstanceFields = (props: {
  readonly name: string
  readonly onName: (name: string) => void
  readonly instances: ReadonlyArray<Instance> | undefined
  readonly instanceId: string
  readonly onInstanceId: (instanceId: string) => void
}) => (
  <div class="row">
    <div class="field">
      <label for="b-name">Name</label>
      <input
        id="b-name"
        required
        maxLength={200}
        value={props.name}
        onInput={(e) => props.onName(e.currentTarget.value)}
      />
    </div>
    {props.instances === undefined ? null : (
      <div class="field">
        <label for="b-instance">Instance</label>
        <select
          id="b-instance"
          required
          value={props.instanceId}
          onChange={(e) => props.onInstanceId(e.currentTarget.value)}
        >
          <option value="">Choose the number to send from</option>
          {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
        </select>
      </div>
    )}
  </div>
)

export const NewBroadcastForm = (props: {
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
  const [when, setWhen] = useState<When>("now")
  const [sendAt, setSendAt] = useState("")
  const [validity, setValidity] = useState("")
  const { busy, progress, error, create } = useBroadcastCreation(props.onCreated)

  const choices = templates.loaded.state === "ready" ? templates.loaded.value : []
  const template = listed ? choices.find((t) => templateKey(t) === chosen) : undefined
  const parameters = useMemo(() => (template === undefined ? undefined : bodyParametersOf(template)), [template])
  // Read again only when the CSV or the template changes (up to 100,000 rows; the list above refreshes every few seconds).
  const read = useMemo(() => (csv.trim() === "" ? undefined : readRecipients(csv, parameters)), [csv, parameters])
  const templateName = listed ? template?.name ?? "" : typedName.trim()
  const language = listed ? template?.language ?? "" : typedLanguage.trim()

  const submit = async (event: Event) => {
    event.preventDefault()
    await create({ name, instanceId, templateName, language, read, when, sendAt, validity })
  }

  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="new-broadcast-title">
      <h2 id="new-broadcast-title">New broadcast</h2>
      <NameAndInstanceFields
        name={name}
        onName={setName}
        instances={props.instances}
        instanceId={instanceId}
        onInstanceId={setInstanceId}
      />
      {listed
        ? (
          <ListedTemplateField
            templates={templates.loaded}
            chosen={chosen}
            onChoose={setChosen}
            template={template}
            parameters={parameters}
          />
        )
        : (
          <TypedTemplateFields
            name={typedName}
            onName={setTypedName}
            language={typedLanguage}
            onLanguage={setTypedLanguage}
          />
        )}
      <RecipientsInput csv={csv} onCsv={setCsv} read={read} />
      <TimingFields
        when={when}
        onWhen={setWhen}
        sendAt={sendAt}
        onSendAt={setSendAt}
        validity={validity}
        onValidity={setValidity}
      />
      <ErrorNote error={error} prefix="Not sent:" />
      <p class="muted" role="status">{progress ?? ""}</p>
      <div>
        <button type="submit" disabled={busy}>{busy ? "Creating…" : "Create broadcast"}</button>
      </div>
    </form>
  )
}
