/**
 * The dashboard's reading of a broadcast's CSV (src/Dashboard/ui/recipients.ts) on its own: the
 * columns a template asks for, quoted fields, header rows, a spreadsheet's tabs and semicolons, each
 * row's problem, and the calls of 1,000 the recipients go in. The browser tests paste and upload
 * real files; these pin the rules.
 */
import { describe, expect, it } from "vitest"
import { bodyParametersOf, chunksOf, readRecipients } from "../../src/Dashboard/ui/recipients.js"

const template = (text: string, more: Record<string, unknown> = {}) => ({
  id: "1",
  name: "order_update",
  language: "en_US",
  status: "APPROVED",
  components: [{ type: "BODY", text }],
  ...more
})

describe("a broadcast's recipients from a CSV", () => {
  it("asks for the body's parameters in order, positional or named, and names those a CSV cannot give", () => {
    expect(bodyParametersOf(template("Hi {{2}} and {{1}}, again {{1}}"))).toEqual({
      names: ["1", "2"],
      named: false,
      elsewhere: []
    })
    expect(bodyParametersOf(template("Hi {{first_name}}, order {{order}}"))).toMatchObject({
      names: ["first_name", "order"],
      named: true
    })
    const withHeader = template("Hi", {
      components: [{ type: "HEADER", format: "IMAGE" }, { type: "BODY", text: "Hi" }, {
        type: "BUTTONS",
        buttons: [{ type: "URL", url: "https://example.com/{{1}}" }]
      }]
    })
    expect(bodyParametersOf(withHeader).elsewhere).toEqual(["its image header", "its buttons"])
  })

  it("reads numbers and user ids, quoted fields, a header row, tabs and semicolons", () => {
    const parameters = bodyParametersOf(template("Hi {{1}}, order {{2}}"))
    const read = readRecipients(
      "to,name,order\r\n+1 (650) 555-0101,Ana,\"A-1, \"\"boxed\"\"\"\nUS.1349120865,Ben,B-2,,\n\n",
      parameters
    )
    expect(read.header).toBe(true)
    expect(read.problems).toEqual([])
    expect(read.recipients).toEqual([
      {
        to: "+16505550101",
        components: [{
          type: "body",
          parameters: [{ type: "text", text: "Ana" }, { type: "text", text: "A-1, \"boxed\"" }]
        }]
      },
      {
        recipient: "US.1349120865",
        components: [{ type: "body", parameters: [{ type: "text", text: "Ben" }, { type: "text", text: "B-2" }] }]
      }
    ])
    expect(readRecipients("16505550101\tAna\tA-1", parameters).recipients).toHaveLength(1)
    expect(readRecipients("16505550101;Ana;A-1", parameters).header).toBe(false)
    // Named parameters carry their names; a template without parameters takes the number alone.
    const named = readRecipients("16505550101,Ana", bodyParametersOf(template("Hi {{first_name}}")))
    expect(named.recipients[0]).toMatchObject({
      components: [{ parameters: [{ type: "text", text: "Ana", parameter_name: "first_name" }] }]
    })
    expect(readRecipients("to\n16505550101", bodyParametersOf(template("Hi"))).recipients).toEqual([
      { to: "16505550101" }
    ])
  })

  it("names each row's problem by its line; without a template every row gives as many parameters as the first", () => {
    const read = readRecipients(
      "to,name\n16505550101\nnobody,Ana\n16505550102,\" \"\n16505550103,Ana,extra",
      bodyParametersOf(template("Hi {{1}}"))
    )
    expect(read.recipients).toEqual([])
    expect(read.problems.map((p) => [p.line, p.message])).toEqual([
      [2, "0 parameters; the template takes 1"],
      [3, expect.stringContaining("“nobody” is neither a number")],
      // An empty last column is no column: a spreadsheet's export often ends its rows with them.
      [4, "0 parameters; the template takes 1"],
      [5, "2 parameters; the template takes 1"]
    ])
    const typed = readRecipients("16505550101,Ana,A-1\n16505550102,Ben\n16505550103,,A-3", undefined)
    expect(typed.parameters).toBe(2)
    expect(typed.problems).toEqual([
      { line: 2, message: "1 parameter; the template takes 2" },
      { line: 3, message: "parameter 1 is empty" }
    ])
  })

  it("sends 1,000 recipients a call", () => {
    const items = Array.from({ length: 2_500 }, (_, i) => i)
    expect(chunksOf(items).map((chunk) => chunk.length)).toEqual([1_000, 1_000, 500])
    expect(chunksOf([])).toEqual([])
  })
})
