/**
 * The template a broadcast sends: chosen from the approved ones where the token can list them (an
 * instance token), typed by name and language where it cannot (an organization token).
 */
import { type Loaded, Resource } from "../../components.js"
import type { BodyParameters } from "../../recipients.js"
import type { TemplateRecord } from "../../types.js"
import { bodyText, templateKey } from "./templates.js"

/** A choice among the approved templates, with the chosen one's body and the columns its CSV needs. */
export const ListedTemplateField = (props: {
  readonly templates: Loaded<ReadonlyArray<TemplateRecord>>
  readonly chosen: string
  readonly onChoose: (key: string) => void
  readonly template: TemplateRecord | undefined
  readonly parameters: BodyParameters | undefined
}) => {
  const { template, parameters } = props
  return (
    <div class="field">
      <label for="b-template">Template</label>
      <Resource loaded={props.templates} what="the approved templates">
        {(list) => (
          <select
            id="b-template"
            required
            value={props.chosen}
            onChange={(e) => props.onChoose(e.currentTarget.value)}
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
}

/** A template's name and language code, typed. */
export const TypedTemplateFields = (props: {
  readonly name: string
  readonly onName: (name: string) => void
  readonly language: string
  readonly onLanguage: (language: string) => void
}) => (
  <div class="row">
    <div class="field wide">
      <label for="b-template-name">Template name</label>
      <input
        id="b-template-name"
        class="mono"
        required
        pattern="[a-z0-9_]{1,512}"
        aria-describedby="b-template-name-help"
        value={props.name}
        onInput={(e) => props.onName(e.currentTarget.value)}
      />
      <p id="b-template-name-help" class="help">
        An approved template of the instance's business account. Templates are listed for instance tokens only: sign in
        with one to choose from them.
      </p>
    </div>
    <div class="field">
      <label for="b-template-language">Language code</label>
      <input
        id="b-template-language"
        class="mono"
        required
        value={props.language}
        onInput={(e) => props.onLanguage(e.currentTarget.value)}
      />
    </div>
  </div>
)
