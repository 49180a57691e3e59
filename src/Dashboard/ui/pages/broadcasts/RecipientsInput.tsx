/** A broadcast's recipients as a CSV, pasted or uploaded, and what was read from it. */
import { type ReadRecipients, RECIPIENTS_PER_BROADCAST, RECIPIENTS_PER_CALL } from "../../recipients.js"
import { numbers } from "./display.js"

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

/** The CSV's text (typed, pasted, or an uploaded file's), its help, and its summary once there is one. */
export const RecipientsInput = (props: {
  readonly csv: string
  readonly onCsv: (csv: string) => void
  readonly read: ReadRecipients | undefined
}) => {
  const loadFile = async (event: { readonly currentTarget: HTMLInputElement }) => {
    const file = event.currentTarget.files?.[0]
    if (file !== undefined) props.onCsv(await file.text())
  }
  return (
    <>
      <div class="field">
        <label for="b-csv">Recipients (CSV)</label>
        <textarea
          id="b-csv"
          class="mono"
          rows={6}
          spellcheck={false}
          placeholder={SAMPLE}
          aria-describedby="b-csv-help csv-summary"
          value={props.csv}
          onInput={(e) => props.onCsv(e.currentTarget.value)}
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
      {props.read === undefined ? null : <CsvSummary read={props.read} />}
    </>
  )
}
