/** Test files with real signatures, and multipart bodies carrying them. */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { expectDocumented } from "./OpenApiCheck.js"

export const JPEG_HEAD = [0xff, 0xd8, 0xff, 0xe0]
export const PNG_HEAD = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
export const WEBP_HEAD = [...Buffer.from("RIFF"), 0, 0, 0, 0, ...Buffer.from("WEBPVP8 ")]
export const PDF_HEAD = [...Buffer.from("%PDF-1.7\n")]
export const OGG_HEAD = [...Buffer.from("OggS"), 0]
export const MP4_HEAD = [0, 0, 0, 0x18, ...Buffer.from("ftypmp42")]
export const MP3_HEAD = [...Buffer.from("ID3"), 4, 0]

/** A file of exactly `size` bytes starting with `head`, the rest a repeating readable pattern. */
export const fileBytes = (head: ReadonlyArray<number>, size: number): Uint8Array<ArrayBuffer> => {
  const bytes = new Uint8Array(size)
  bytes.set(head.slice(0, size))
  for (let i = head.length; i < size; i++) bytes[i] = 97 + (i % 26)
  return bytes
}

export const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

export type FormValue = string | {
  readonly bytes: Uint8Array<ArrayBuffer>
  readonly filename: string
  readonly type?: string
}

export const form = (fields: Readonly<Record<string, FormValue>>): FormData => {
  const data = new FormData()
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === "string") data.append(name, value)
    else data.append(name, new Blob([value.bytes], { type: value.type ?? "application/octet-stream" }), value.filename)
  }
  return data
}

/**
 * Sends only the head of a multipart request declaring `contentLength` bytes, and reads the answer:
 * the hub must refuse from the declared length alone, without the body ever being sent or allocated.
 */
export const declaredOnly = (baseUrl: string, path: string, token: string, contentLength: number) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const url = new URL(baseUrl)
      let received = ""
      Bun.connect({
        hostname: url.hostname,
        port: Number(url.port),
        socket: {
          open: (socket) => {
            socket.write(
              `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\n` +
                `Content-Type: multipart/form-data; boundary=x\r\nContent-Length: ${contentLength}\r\n\r\n--x\r\n`
            )
          },
          data: (socket, data) => {
            received += new TextDecoder().decode(data)
            if (/\r\n\r\n[\s\S]*\}$/.test(received)) socket.end()
          },
          close: () => resolve(received),
          error: (_, error) => reject(error)
        }
      }).catch(reject)
    }).then(async (received) => {
      await expectRawDocumented("POST", path, received)
      return received
    })
  )

/** A raw HTTP/1.1 answer (one with Content-Length, as the hub's JSON answers are), checked against the OpenAPI document. */
const expectRawDocumented = async (method: string, path: string, raw: string) => {
  const [head = "", body = ""] = raw.split("\r\n\r\n", 2)
  const [statusLine = "", ...headerLines] = head.split("\r\n")
  const headers = new Headers()
  for (const line of headerLines) {
    const colon = line.indexOf(":")
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  await expectDocumented({ method, url: path, status: Number(statusLine.split(" ")[1]), headers, text: body })
}
