import { describe, expect, it, layer } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
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
import { seedTenant, TestHub } from "./support/TestHub.js"

const KB = 1024
const MB = 1024 * 1024

const upload = (token: string, fields: Parameters<typeof form>[0], path = "/media") =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", path, { token, body: form(fields) }))

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
      expect(result.status).toBe(200)
      expect(Object.keys(result.body)).toEqual(["id"])
      expect(String(result.body.id)).toMatch(/^\d+$/)

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
      const hub = yield* TestHub
      const info = yield* hub.request("GET", `/media/${result.body.id}`, { token: tenant.instanceToken })
      expect(info.status).toBe(200)
      expect(info.body).toMatchObject({
        id: result.body.id,
        mime_type: "image/jpeg",
        sha256: sha256(bytes),
        file_size: bytes.byteLength
      })
      const download = yield* Effect.promise(() =>
        checkedFetch(`${hub.baseUrl}/media/${result.body.id}/download`, {
          headers: { authorization: `Bearer ${tenant.instanceToken}` }
        })
      )
      expect(download.status).toBe(200)
      expect(download.headers.get("content-type")).toBe("image/jpeg")
      // No Content-Length assertion: Bun 1.4 drops it from streamed bodies (oven-sh/bun#10507) and sends chunked.
      const downloaded = new Uint8Array(yield* Effect.promise(() => download.arrayBuffer()))
      expect(sha256(downloaded)).toBe(sha256(bytes))
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
      }, "/api/media")
      expect(result.status).toBe(200)
      expect(String(result.body.id)).toMatch(/^\d+$/)
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
        const result = yield* upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: c.type,
          ...(c.kind === undefined ? {} : { kind: c.kind }),
          file: { bytes: fileBytes(c.head, c.size), filename: "f" }
        })
        expect({ ...c, status: result.status }).toEqual({ ...c, status: 200 })
      }
    }))

  it.effect("a type not allowed is 415, before anything goes upstream", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const zip = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "application/zip",
        file: { bytes: fileBytes([0x50, 0x4b, 3, 4], 100), filename: "a.zip" }
      })
      expect(zip.status).toBe(415)
      expect(zip.body).toMatchObject({ statusCode: 415, error: "unsupported_media_type" })
      expect(String(zip.body.message)).toContain("application/zip")
      const pngSticker = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "image/png",
        kind: "sticker",
        file: { bytes: fileBytes(PNG_HEAD, 100), filename: "s.png" }
      })
      expect(pngSticker.status).toBe(415)
      expect(pngSticker.body.message).toBe("Type image/png is not allowed for a sticker; allowed: image/webp")
      expect(yield* mediaRequests).toEqual([])
    }))

  it.effect("a file just over its kind's limit is 413: image 5 MB, sticker 100 KB", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const image = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "image/jpeg",
        file: { bytes: fileBytes(JPEG_HEAD, 5 * MB + 1), filename: "big.jpg" }
      })
      expect(image.status).toBe(413)
      expect(image.body).toMatchObject({
        statusCode: 413,
        error: "payload_too_large",
        details: { kind: "image", max_bytes: 5 * MB, size: 5 * MB + 1 }
      })
      const sticker = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "image/webp",
        kind: "sticker",
        file: { bytes: fileBytes(WEBP_HEAD, 100 * KB + 1), filename: "s.webp" }
      })
      expect(sticker.status).toBe(413)
      expect(sticker.body.message).toBe("A sticker (image/webp) may be at most 100 KB; this file is 100.0 KB")
      expect(yield* mediaRequests).toEqual([])
    }))

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
        const result = yield* upload(tenant.instanceToken, {
          messaging_product: "whatsapp",
          type: c.type,
          file: { bytes: fileBytes(c.head, 64), filename: "f" }
        })
        expect(result.status).toBe(400)
        expect(result.body).toEqual({
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
      const nothing = yield* upload(tenant.instanceToken, { note: "no fields" })
      expect(nothing.status).toBe(400)
      expect(nothing.body.details).toEqual([
        { field: "file", message: "is missing" },
        { field: "type", message: "is missing" },
        { field: "messaging_product", message: "is missing" }
      ])
      const wrong = yield* upload(tenant.instanceToken, {
        messaging_product: "sms",
        type: "image/jpeg",
        kind: "gif",
        file: { bytes: fileBytes(JPEG_HEAD, 10), filename: "a.jpg" }
      })
      expect(wrong.status).toBe(400)
      expect(wrong.body.details).toEqual([
        { field: "messaging_product", message: "must be \"whatsapp\"" },
        { field: "kind", message: "must be one of image, audio, video, document, sticker" }
      ])
      const empty = yield* upload(tenant.instanceToken, {
        messaging_product: "whatsapp",
        type: "image/jpeg",
        file: { bytes: new Uint8Array(0), filename: "empty.jpg" }
      })
      expect(empty.status).toBe(400)
      expect(empty.body.details).toEqual([{ field: "file", message: "must not be empty" }])
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
        const result = method === "POST"
          ? yield* upload(tenant.orgToken, {
            messaging_product: "whatsapp",
            type: "image/jpeg",
            file: { bytes: fileBytes(JPEG_HEAD, 10), filename: "a.jpg" }
          }, path)
          : yield* hub.request(method, path, { token: tenant.orgToken })
        expect(result.status).toBe(403)
        expect(result.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      }
      expect((yield* hub.request("GET", "/media/123")).status).toBe(401)
    }))

  it.effect("GET /media/{id}: file_size as an integer, the lookup limited to the instance's number", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
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
      const info = yield* hub.request("GET", "/media/1037543291543636", { token: tenant.instanceToken })
      expect(info.status).toBe(200)
      expect(info.body).toEqual({
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

  it.effect("GET /media/{id}: a non-numeric id is 400, an unknown one 404", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const bad = yield* hub.request("GET", "/media/not-a-media-id", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([{ field: "mediaId", message: "must be a numeric Graph id (digits only)" }])
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
      const missing = yield* hub.request("GET", "/media/999", { token: tenant.instanceToken })
      expect(missing.status).toBe(404)
      expect(missing.body).toEqual({ statusCode: 404, message: "media 999 was not found", error: "not_found" })
      const missingDownload = yield* hub.request("GET", "/media/999/download", { token: tenant.instanceToken })
      expect(missingDownload.status).toBe(404)
    }))

  it.effect("download: a stale URL (401/404) is fetched afresh once", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-dl" })
      yield* fake.respond({ method: "GET", path: /^\/lookaside\// }, { status: 404, body: "gone" })
      const result = yield* hub.request("GET", "/media/555/download", { token: tenant.instanceToken })
      expect(result.status).toBe(200)
      expect(result.text).toBe("fake media 555")
      expect(result.headers.get("content-type")).toBe("image/jpeg")
      const calls = (yield* fake.requests).map((r) => `${r.method} ${r.path}`)
      expect(calls).toEqual(["GET /v23.0/555", "GET /lookaside/555", "GET /v23.0/555", "GET /lookaside/555"])
      const downloads = (yield* fake.requests).filter((r) => r.path.startsWith("/lookaside/"))
      expect(downloads.map((r) => r.headers.authorization)).toEqual(["Bearer EAAG-dl", "Bearer EAAG-dl"])

      yield* fake.reset
      yield* fake.respond({ method: "GET", path: /^\/lookaside\// }, { status: 404, body: "gone" }, 2)
      const gone = yield* hub.request("GET", "/media/556/download", { token: tenant.instanceToken })
      expect(gone.status).toBe(404)
      expect((yield* fake.requests).length).toBe(4)
    }))
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
        const queued = yield* Effect.fork(hub.request("GET", "/media/702/download", { token: slow.instanceToken }))
        const served = yield* hub.request("GET", "/media/703/download", { token: other.instanceToken })
        expect(served.status).toBe(200)
        expect(served.text).toBe("fake media 703")
        expect(queued.unsafePoll()).toBeNull()
        const outcome = yield* Fiber.join(stalled)
        expect(outcome).toMatchObject({ status: 200, body: "cut off" })
        expect(outcome.ms).toBeLessThan(5_000)
        // The place is given back when the stalled download ends: the waiting one is then served.
        const next = yield* Fiber.join(queued)
        expect(next.status).toBe(200)
        expect(next.text).toBe("fake media 702")
      }))

    it.effect("the access token goes only to Meta's media hosts: a media URL elsewhere is not fetched (502)", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
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
        const refused = yield* hub.request("GET", "/media/704/download", { token: tenant.instanceToken })
        expect(refused.status).toBe(502)
        expect(refused.text).not.toContain("EAAG-keep")
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
