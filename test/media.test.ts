/**
 * Media against a recording fake Graph server: uploads, info and downloads. Feature tests talk
 * through the typed client; raw requests stay for the wire and the edge, in blocks or lines that say why.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Duration, Effect, Either, Fiber } from "effect"
import { errorBody } from "../src/Domain/Errors.js"
import { baseMimeType, kindFor, matchesSignature, MAX_UPLOAD_BYTES, MEDIA_KINDS } from "../src/Media/MediaKinds.js"
import { isMediaHost } from "../src/Upstream/GraphMedia.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import {
  declaredOnly,
  fileBytes,
  form,
  JPEG_HEAD,
  MP3_HEAD,
  MP4_HEAD,
  OGG_HEAD,
  PDF_HEAD,
  PNG_HEAD,
  sha256,
  WEBP_HEAD
} from "./support/Files.js"
import { checkedFetch } from "./support/OpenApiCheck.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const KB = 1024
const MB = 1024 * 1024

const mediaClient = (token: string) => Effect.flatMap(TestHub, (hub) => hub.client(token))

/**
 * An upload through the typed client, on /media or on /api/media: its payload is the multipart form
 * as built here (the client sends a FormData as it is, so a form missing fields can be sent too).
 */
const upload = (token: string, fields: Parameters<typeof form>[0], endpoint: "upload" | "uploadApi" = "upload") =>
  Effect.flatMap(mediaClient(token), (client) =>
    endpoint === "upload"
      ? client.media.upload({ payload: form(fields) })
      : client.media.uploadApi({ payload: form(fields) }))

/**
 * A download through the typed client, read as text, with its Content-Type: the fake's media of these
 * tests are text. Bytes that are not text stay raw (`downloadedBytes`).
 */
const downloadedText = (token: string, mediaId: string) =>
  Effect.flatMap(mediaClient(token), (client) =>
    Effect.map(
      client.media.download({ path: { mediaId }, withResponse: true }),
      ([bytes, response]) => ({
        text: new TextDecoder().decode(bytes),
        contentType: response.headers["content-type"]
      })
    ))

/**
 * Raw: a download's exact bytes. The tests' typed client reads every answer as text to check it
 * against the document, which would alter bytes that are not UTF-8.
 */
const downloadedBytes = (token: string, mediaId: string) =>
  Effect.flatMap(TestHub, (hub) =>
    Effect.promise(async () => {
      const download = await checkedFetch(`${hub.baseUrl}/media/${mediaId}/download`, {
        headers: { authorization: `Bearer ${token}` }
      })
      return {
        status: download.status,
        contentType: download.headers.get("content-type"),
        bytes: new Uint8Array(await download.arrayBuffer())
      }
    }))

const mediaRequests = Effect.map(
  Effect.flatMap(FakeGraph, (fake) => fake.requests),
  (all) => all.filter((r) => r.method === "POST" && r.path.endsWith("/media"))
)

layer(testHubOnFakeGraph())("media on the Graph API", (it) => {
  it.effect("POST /media sends the file, type and messaging_product upstream with the instance's token, bytes intact", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-media-token" })
      const bytes = fileBytes(JPEG_HEAD, 300 * KB)
      const result = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "image/jpeg",
        file: { bytes, filename: "photo.jpg", type: "image/jpeg" }
      })
      // No other key: the answer is checked against the document, whose MediaUploaded allows none.
      expect(Object.keys(result)).toEqual(["id"])
      expect(result.id).toMatch(/^\d+$/)

      const [sent, ...others] = yield* mediaRequests
      expect(others).toEqual([])
      expect(sent?.path).toBe(`/v23.0/${tenant.phoneNumberId}/media`)
      expect(sent?.headers.authorization).toBe("Bearer EAAG-media-token")
      expect(sent?.form?.messaging_product).toBe("whatsapp")
      expect(sent?.form?.type).toBe("image/jpeg")
      const file = sent?.form?.file
      expect(typeof file === "object" ? { filename: file.filename, type: file.type, size: file.size } : file).toEqual({
        filename: "photo.jpg",
        type: "image/jpeg",
        size: bytes.byteLength
      })

      // The fake keeps what it received: its sha256 and the downloaded bytes prove nothing was altered.
      const info = yield* (yield* mediaClient(tenant.instanceToken)).media.info({ path: { mediaId: result.id } })
      expect(info).toMatchObject({
        id: result.id,
        mime_type: "image/jpeg",
        sha256: sha256(bytes),
        file_size: bytes.byteLength
      })
      const download = yield* downloadedBytes(tenant.instanceToken, result.id)
      expect(download.status).toBe(200)
      expect(download.contentType).toBe("image/jpeg")
      // No Content-Length assertion: Bun 1.4 drops it from streamed bodies (oven-sh/bun#10507) and sends chunked.
      expect(sha256(download.bytes)).toBe(sha256(bytes))
    }))

  it.effect("POST /api/media is the same endpoint", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const bytes = fileBytes(OGG_HEAD, 2 * KB)
      const result = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "audio/ogg; codecs=opus",
        file: { bytes, filename: "voice.ogg" }
      }, "uploadApi")
      expect(result.id).toMatch(/^\d+$/)
      const [sent] = yield* mediaRequests
      expect(sent?.path).toBe(`/v23.0/${tenant.phoneNumberId}/media`)
      expect(sent?.form?.type).toBe("audio/ogg")
    }))

  it.effect("every allowed kind passes at its limit", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const cases = [
        { type: "image/png", head: PNG_HEAD, size: 5 * MB },
        { type: "image/webp", head: WEBP_HEAD, size: 4 * MB },
        { type: "image/webp", head: WEBP_HEAD, size: 100 * KB, kind: "sticker" },
        { type: "audio/mpeg", head: MP3_HEAD, size: 16 * KB },
        { type: "video/mp4", head: MP4_HEAD, size: 16 * KB },
        { type: "video/3gp", head: MP4_HEAD, size: 8 * KB },
        { type: "application/pdf", head: PDF_HEAD, size: 8 * KB },
        { type: "text/plain", head: [], size: 100 }
      ]
      for (const c of cases) {
        const result = yield* Effect.either(upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: c.type,
          ...(c.kind === undefined ? {} : { kind: c.kind }),
          file: { bytes: fileBytes(c.head, c.size), filename: "f" }
        }))
        // The refusal itself when there is one, so a failure shows it beside the case.
        expect({ ...c, outcome: Either.isRight(result) ? "uploaded" : result.left }).toEqual({
          ...c,
          outcome: "uploaded"
        })
      }
    }))

  it.effect("a type not allowed is 415, before anything goes upstream", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const zip = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: "application/zip",
          file: { bytes: fileBytes([0x50, 0x4b, 3, 4], 100), filename: "a.zip" }
        }),
        "UnsupportedMediaType"
      )
      expect(errorBody(zip)).toMatchObject({ statusCode: 415, error: "unsupported_media_type" })
      expect(zip.message).toContain("application/zip")
      const pngSticker = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: "image/png",
          kind: "sticker",
          file: { bytes: fileBytes(PNG_HEAD, 100), filename: "s.png" }
        }),
        "UnsupportedMediaType"
      )
      expect(pngSticker.message).toBe("Type image/png is not allowed for a sticker; allowed: image/webp")
      expect(yield* mediaRequests).toEqual([])
    }))

  it.effect("a file just over its kind's limit is 413: image 5 MB, sticker 100 KB", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const image = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: "image/jpeg",
          file: { bytes: fileBytes(JPEG_HEAD, 5 * MB + 1), filename: "big.jpg" }
        }),
        "PayloadTooLarge"
      )
      expect(errorBody(image)).toMatchObject({
        statusCode: 413,
        error: "payload_too_large",
        details: { kind: "image", max_bytes: 5 * MB, size: 5 * MB + 1 }
      })
      const sticker = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: "image/webp",
          kind: "sticker",
          file: { bytes: fileBytes(WEBP_HEAD, 100 * KB + 1), filename: "s.webp" }
        }),
        "PayloadTooLarge"
      )
      expect(sticker.message).toBe("A sticker (image/webp) may be at most 100 KB; this file is 100.0 KB")
      expect(yield* mediaRequests).toEqual([])
    }))

  it.effect("content that contradicts the declared type is 400", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const cases = [
        { type: "image/png", head: JPEG_HEAD },
        { type: "image/jpeg", head: PNG_HEAD },
        { type: "image/webp", head: [...Buffer.from("RIFF"), 0, 0, 0, 0, ...Buffer.from("WAVE")] },
        { type: "application/pdf", head: [...Buffer.from("hello")] },
        { type: "audio/ogg", head: MP3_HEAD },
        { type: "audio/mpeg", head: OGG_HEAD },
        { type: "video/mp4", head: PDF_HEAD }
      ]
      for (const c of cases) {
        const refused = yield* refusedWith(
          upload(tenant.instanceToken, {
            messaging_product: "whatsapp",
            type: c.type,
            file: { bytes: fileBytes(c.head, 64), filename: "f" }
          }),
          "BadRequest"
        )
        expect(errorBody(refused)).toEqual({
          statusCode: 400,
          message: `Invalid request: type: the file's content is not ${c.type}`,
          error: "type_mismatch",
          details: [{ field: "type", message: `the file's content is not ${c.type}` }]
        })
      }
      expect(yield* mediaRequests).toEqual([])
    }))

  it.effect("missing or wrong fields are 400 naming each field; an empty file too", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const nothing = yield* refusedWith(upload(tenant.instanceToken, { note: "no fields" }), "BadRequest")
      expect(nothing.details).toEqual([
        { field: "file", message: "is missing" },
        { field: "type", message: "is missing" },
        { field: "messaging_product", message: "is missing" }
      ])
      const wrong = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "sms",
          type: "image/jpeg",
          kind: "gif",
          file: { bytes: fileBytes(JPEG_HEAD, 10), filename: "a.jpg" }
        }),
        "BadRequest"
      )
      expect(wrong.details).toEqual([
        { field: "messaging_product", message: "must be \"whatsapp\"" },
        { field: "kind", message: "must be one of image, audio, video, document, sticker" }
      ])
      const empty = yield* refusedWith(
        upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: "image/jpeg",
          file: { bytes: new Uint8Array(0), filename: "empty.jpg" }
        }),
        "BadRequest"
      )
      expect(empty.details).toEqual([{ field: "file", message: "must not be empty" }])
    }))

  it.effect("GET /media/{id}: file_size as an integer, the lookup limited to the instance's number", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-info" })
      yield* fake.respond({ method: "GET", path: "/1037543291543636" }, {
        body: {
          messaging_product: "whatsapp",
          url: "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1037543291543636",
          mime_type: "image/jpeg",
          sha256: "73298ec14751f0f5f4f9c6a8e2e8d2d8",
          file_size: "303833",
          id: "1037543291543636"
        }
      })
      const info = yield* (yield* mediaClient(tenant.instanceToken)).media.info({
        path: { mediaId: "1037543291543636" }
      })
      // Checked against the document too, whose MediaInfo allows no other key (messaging_product is left out).
      expect(info).toEqual({
        url: "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1037543291543636",
        mime_type: "image/jpeg",
        sha256: "73298ec14751f0f5f4f9c6a8e2e8d2d8",
        file_size: 303833,
        id: "1037543291543636"
      })
      const sent = yield* fake.lastRequest
      expect(sent).toMatchObject({
        method: "GET",
        path: "/v23.0/1037543291543636",
        query: { phone_number_id: tenant.phoneNumberId }
      })
      expect(sent.headers.authorization).toBe("Bearer EAAG-info")
    }))

  it.effect("GET /media/{id}: an unknown id is 404, for its info and its download", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const client = yield* mediaClient(tenant.instanceToken)
      yield* fake.respond({ path: "/999" }, {
        status: 400,
        body: {
          error: {
            message: "Unsupported get request. Object with ID '999' does not exist",
            code: 100,
            error_subcode: 33,
            fbtrace_id: "x"
          }
        }
      }, 2)
      const missing = yield* refusedWith(client.media.info({ path: { mediaId: "999" } }), "NotFound")
      expect(errorBody(missing)).toEqual({ statusCode: 404, message: "media 999 was not found", error: "not_found" })
      yield* refusedWith(client.media.download({ path: { mediaId: "999" } }), "NotFound")
    }))

  it.effect("download: a stale URL (401/404) is fetched afresh once", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-dl" })
      yield* fake.respond({ method: "GET", path: /^\/lookaside\// }, { status: 404, body: "gone" })
      const result = yield* downloadedText(tenant.instanceToken, "555")
      expect(result).toEqual({ text: "fake media 555", contentType: "image/jpeg" })
      const calls = (yield* fake.requests).map((r) => `${r.method} ${r.path}`)
      expect(calls).toEqual(["GET /v23.0/555", "GET /lookaside/555", "GET /v23.0/555", "GET /lookaside/555"])
      const downloads = (yield* fake.requests).filter((r) => r.path.startsWith("/lookaside/"))
      expect(downloads.map((r) => r.headers.authorization)).toEqual(["Bearer EAAG-dl", "Bearer EAAG-dl"])

      yield* fake.reset
      yield* fake.respond({ method: "GET", path: /^\/lookaside\// }, { status: 404, body: "gone" }, 2)
      yield* refusedWith(downloadedText(tenant.instanceToken, "556"), "NotFound")
      expect((yield* fake.requests).length).toBe(4)
    }))

  // Raw: refusals at the edge (a declared length, the token's kind, a path the typed client would not encode).
  describe("at the edge", () => {
    it.effect("a declared length over the largest limit (100 MB) is 413 before the body is read", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        yield* fake.reset
        const tenant = yield* seedTenant()
        const answer = yield* declaredOnly(hub.baseUrl, "/media", tenant.instanceToken, 110 * MB)
        expect(answer).toMatch(/^HTTP\/1\.1 413/)
        const body: unknown = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))
        expect(body).toEqual({
          statusCode: 413,
          message: "The upload is too large: at most 100.0 MB per file",
          error: "payload_too_large",
          details: { max_bytes: 100 * MB, content_length: 110 * MB }
        })
        // A body too large is refused before anything else, the token included: nothing of it is read.
        expect(yield* declaredOnly(hub.baseUrl, "/api/media", "mhk_wrong", 110 * MB)).toMatch(/^HTTP\/1\.1 413/)
        expect(yield* declaredOnly(hub.baseUrl, "/api/media", "mhk_wrong", 1 * MB)).toMatch(/^HTTP\/1\.1 401/)
        expect(yield* mediaRequests).toEqual([])
      }))

    it.effect("organization tokens cannot use media endpoints (403 forbidden_token_kind)", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        for (
          const [method, path] of [["POST", "/media"], ["POST", "/api/media"], ["GET", "/media/123"], [
            "GET",
            "/media/123/download"
          ]] as const
        ) {
          const result = yield* hub.request(method, path, {
            token: tenant.orgToken,
            ...(method === "POST"
              ? {
                body: form({
                  messaging_product: "whatsapp",
                  type: "image/jpeg",
                  file: { bytes: fileBytes(JPEG_HEAD, 10), filename: "a.jpg" }
                })
              }
              : {})
          })
          expect(result.status).toBe(403)
          expect(result.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
        }
        expect((yield* hub.request("GET", "/media/123")).status).toBe(401)
      }))

    it.effect("GET /media/{id}: a non-numeric id is 400", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const bad = yield* hub.request("GET", "/media/not-a-media-id", { token: tenant.instanceToken })
        expect(bad.status).toBe(400)
        expect(bad.body.details).toEqual([{ field: "mediaId", message: "must be a numeric Graph id (digits only)" }])
      }))
  })
})

layer(testHubOnFakeGraph({ graphUploadTimeout: Duration.millis(600), mediaDownloadsPerOrganization: 1 }), {
  excludeTestServices: true
})(
  "media downloads: deadline, share and hosts",
  (it) => {
    it.effect("a body that stalls ends within HUB_GRAPH_UPLOAD_TIMEOUT; meanwhile the organization's share waits and another organization is served", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const slow = yield* seedTenant({ accessToken: "EAAG-slow" })
        const other = yield* seedTenant({ accessToken: "EAAG-other" })
        yield* fake.respond({ method: "GET", path: "/lookaside/701" }, { stallAfter: "first bytes" })
        const began = Date.now()
        // Raw: a body cut mid-stream, which the typed client shows only as a failure, not as a 200 cut short.
        const stalled = yield* Effect.fork(Effect.promise(async () => {
          const answer = await fetch(`${hub.baseUrl}/media/701/download`, {
            headers: { authorization: `Bearer ${slow.instanceToken}` }
          })
          // The answer began (200), then its body is cut at the deadline.
          const body = await answer.text().then(() => "complete", () => "cut off")
          return { status: answer.status, body, ms: Date.now() - began }
        }))
        yield* fake.waitForRequests(2)
        // The slow organization's share (1) is held: its next download waits; another organization's does not.
        const queued = yield* Effect.fork(downloadedText(slow.instanceToken, "702"))
        const served = yield* downloadedText(other.instanceToken, "703")
        expect(served.text).toBe("fake media 703")
        expect(queued.unsafePoll()).toBeNull()
        const outcome = yield* Fiber.join(stalled)
        expect(outcome).toMatchObject({ status: 200, body: "cut off" })
        expect(outcome.ms).toBeLessThan(5_000)
        // The place is given back when the stalled download ends: the waiting one is then served.
        const next = yield* Fiber.join(queued)
        expect(next.text).toBe("fake media 702")
      }))

    it.effect("the access token goes only to Meta's media hosts: a media URL elsewhere is not fetched (502)", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        yield* fake.reset
        const tenant = yield* seedTenant({ accessToken: "EAAG-keep" })
        const elsewhere = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("stolen") })
        yield* Effect.addFinalizer(() => Effect.promise(() => elsewhere.stop(true)))
        yield* fake.respond({ method: "GET", path: "/v23.0/704" }, {
          body: {
            url: `http://127.0.0.1:${elsewhere.port}/lookaside/704`,
            mime_type: "image/jpeg",
            sha256: "x",
            file_size: 5,
            id: "704",
            messaging_product: "whatsapp"
          }
        })
        const refused = yield* refusedWith(downloadedText(tenant.instanceToken, "704"), "UpstreamFailure")
        expect(refused.status).toBe(502)
        expect(JSON.stringify(errorBody(refused))).not.toContain("EAAG-keep")
        expect((yield* fake.requests).map((r) => r.path)).toEqual(["/v23.0/704"])
        expect(
          isMediaHost(
            "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1",
            "https://graph.facebook.com/v25.0"
          )
        ).toBe(true)
        expect(isMediaHost("https://scontent.xx.fbcdn.net/v/t1", "https://graph.facebook.com/v25.0")).toBe(true)
        for (
          const url of [
            "http://lookaside.fbsbx.com/x",
            "https://fbsbx.com.evil.example/x",
            "https://evilfbsbx.com/x",
            "https://user@lookaside.fbsbx.com/x",
            "not a url"
          ]
        ) {
          expect(isMediaHost(url, "https://graph.facebook.com/v25.0"), url).toBe(false)
        }
      }).pipe(Effect.scoped))
  }
)

describe("media limits table", () => {
  it("documents are PDF, text and office formats up to 100 MB; the parser cuts at the largest limit", () => {
    expect(MEDIA_KINDS.document.maxBytes).toBe(100 * MB)
    expect(MAX_UPLOAD_BYTES).toBe(100 * MB)
    for (
      const type of [
        "application/pdf",
        "text/plain",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
      ]
    ) {
      expect(kindFor(type, undefined)).toBe("document")
    }
    expect(MEDIA_KINDS.audio.maxBytes).toBe(16 * MB)
    expect(MEDIA_KINDS.video.maxBytes).toBe(16 * MB)
    expect(MEDIA_KINDS.image.maxBytes).toBe(5 * MB)
    expect(MEDIA_KINDS.sticker.maxBytes).toBe(100 * KB)
  })

  it("image/webp counts as an image unless the upload says sticker", () => {
    expect(kindFor("image/webp", undefined)).toBe("image")
    expect(kindFor("image/webp", "sticker")).toBe("sticker")
    expect(kindFor("image/jpeg", "sticker")).toBeUndefined()
    expect(kindFor("application/zip", undefined)).toBeUndefined()
    expect(baseMimeType(" Audio/OGG; codecs=opus")).toBe("audio/ogg")
  })

  it("signatures: AAC (ADTS) is not MP3 and MP3 frames are not AAC; M4A and 3GP are ISO media", () => {
    const adts = Uint8Array.from([0xff, 0xf1, 0x50, 0x80])
    const mp3Frame = Uint8Array.from([0xff, 0xfb, 0x90, 0x64])
    expect(matchesSignature("audio/aac", adts)).toBe(true)
    expect(matchesSignature("audio/aac", Uint8Array.from([0xff, 0xf9, 0, 0]))).toBe(true)
    expect(matchesSignature("audio/mpeg", adts)).toBe(false)
    expect(matchesSignature("audio/mpeg", mp3Frame)).toBe(true)
    expect(matchesSignature("audio/aac", mp3Frame)).toBe(false)
    expect(matchesSignature("audio/mp4", Uint8Array.from([0, 0, 0, 0x20, ...Buffer.from("ftypM4A ")]))).toBe(true)
    expect(matchesSignature("video/3gp", Uint8Array.from([0, 0, 0, 0x14, ...Buffer.from("ftyp3gp4")]))).toBe(true)
    expect(matchesSignature("video/mp4", Uint8Array.from([0, 0, 0]))).toBe(false)
    expect(matchesSignature("text/plain", Uint8Array.from([0xff]))).toBe(true)
  })
})
