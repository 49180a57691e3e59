/**
 * A multipart/form-data body built by hand and streamed with an exact Content-Length:
 * - Bun's FormData rewrites a part's content type (`application/json` becomes
 *   `application/json;charset=utf-8`), and the upstream checks that type;
 * - a Blob composed of a file-backed Blob (Bun.file) loses the file's bytes in Bun,
 *   so the file is streamed from its own Blob instead, never held in memory whole.
 */
import { HttpBody } from "@effect/platform"
import { Stream } from "effect"
import { randomBytes } from "node:crypto"

export type MultipartField =
  | { readonly name: string; readonly value: string }
  | { readonly name: string; readonly filename: string; readonly contentType: string; readonly content: Blob }

/** Quotes, CR and LF in names are percent-encoded, as browsers do (HTML form submission). */
const quoted = (text: string) => `"${text.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A")}"`

const encoder = new TextEncoder()

export const multipartBody = (fields: ReadonlyArray<MultipartField>): HttpBody.HttpBody => {
  const boundary = `----MessagingHub${randomBytes(12).toString("hex")}`
  const chunks: Array<Uint8Array | Blob> = []
  for (const field of fields) {
    if ("value" in field) {
      chunks.push(
        encoder.encode(
          `--${boundary}\r\nContent-Disposition: form-data; name=${quoted(field.name)}\r\n\r\n${field.value}\r\n`
        )
      )
    } else {
      chunks.push(
        encoder.encode(
          `--${boundary}\r\nContent-Disposition: form-data; name=${quoted(field.name)}; filename=${
            quoted(field.filename)
          }\r\n` +
            `Content-Type: ${field.contentType.replace(/[\r\n]/g, "")}\r\n\r\n`
        ),
        field.content,
        encoder.encode("\r\n")
      )
    }
  }
  chunks.push(encoder.encode(`--${boundary}--\r\n`))
  const length = chunks.reduce((sum, chunk) => sum + (chunk instanceof Blob ? chunk.size : chunk.byteLength), 0)
  const stream = Stream.flatMap(
    Stream.fromIterable(chunks),
    (chunk) =>
      chunk instanceof Blob ? Stream.fromReadableStream(() => chunk.stream(), (cause) => cause) : Stream.succeed(chunk),
    { concurrency: 1 }
  )
  return HttpBody.stream(stream, `multipart/form-data; boundary=${boundary}`, length)
}
