/**
 * Our own HTTP/1.1 client, for the two hot paths only: webhook deliveries (src/Delivery/Sender.ts)
 * and the send's Graph call (src/Upstream/GraphSend.ts); every other Graph call goes through
 * @effect/platform's HttpClient over fetch. Why: Bun's fetch parks at most 64 idle sockets in all and
 * closes every other connection after its answer, so past 64 requests in flight most of them opened
 * a new connection (and TLS session) and left a socket in TIME_WAIT, and a request cost 43–48 µs of
 * CPU against 11 µs on a kept connection (against a 100 ms upstream with 1,000 calls in flight, 9,389
 * calls/s against fetch's 2,746: docs/PERFORMANCE.md). Here a connection is kept for as long as its
 * server keeps it. Idle connections do not keep the process alive.
 *
 * This file is the pool: connections (src/Net/Connection.ts) shared per origin (scheme, address,
 * port and the name a certificate must carry), idle ones kept and swept, and a cap per origin
 * (HUB_MAX_CONNECTIONS_PER_ORIGIN): at the cap a request waits, first come first served, for a
 * connection to come back or to close, for as long as its own signal allows. A connection counts
 * against the cap from the moment it is asked for until its socket is gone (a connect that outlives
 * its request's deadline keeps its place until it ends), so the sockets open to an origin never
 * exceed the cap.
 */
import {
  ABORTED,
  type ConnectFailure,
  Connection,
  type ConnectionRequest,
  openConnection,
  type Origin
} from "./Connection.js"
import type { ReaderAnswer } from "./ResponseReader.js"

/** A request to send over the pool: what one connection carries, where, and whether it may go again. */
export interface PoolRequest extends ConnectionRequest {
  readonly origin: Origin
  /**
   * May go again on a new connection when a kept one closes before any byte of the answer (the
   * server may have closed it just as the request left): only for requests it is safe to repeat.
   */
  readonly resendable: boolean
}

export type PoolOutcome =
  | { readonly _tag: "Answer"; readonly answer: ReaderAnswer }
  | { readonly _tag: "Malformed"; readonly message: string }
  | ConnectFailure

/** The clock and the repeating timer of the idle sweep; tests drive them by hand. */
export interface PoolTimers {
  /** Milliseconds on a clock that only moves forward. */
  readonly now: () => number
  /** Calls `tick` every `ms` until the returned function is called; must not keep the process alive. */
  readonly every: (ms: number, tick: () => void) => () => void
}

const systemTimers: PoolTimers = {
  now: () => performance.now(),
  every: (ms, tick) => {
    const timer = setInterval(tick, ms)
    timer.unref()
    return () => clearInterval(timer)
  }
}

export interface PoolOptions {
  /** Most idle connections kept per origin. */
  readonly maxIdlePerOrigin: number
  /** Most connections per origin, idle, in use or connecting; past it, requests wait in turn. */
  readonly maxPerOrigin: number
  /**
   * Idle connections are closed once idle this long, or up to a quarter longer (default 4 s, below
   * common servers' keep-alive timeouts of 5 s or more). A server that closes one first is covered for
   * resendable requests: a kept connection that closes before any answer has its request sent
   * again on a new one.
   */
  readonly idleMs?: number
  /** Trusted CAs instead of the system's (tests). */
  readonly ca?: string
  /** The idle sweep's clock and timer (default: the system's). */
  readonly timers?: PoolTimers
}

/** A connection of the pool, and the place under its origin's cap it counts in until its socket is gone. */
class PooledConnection extends Connection {
  /** Its place went to an exchange another client makes (KeepAlivePool.hold): closing it leaves the count as it is. */
  placeHandedOn = false

  constructor(origin: Origin, readonly place: OriginPlace, private readonly leave: (place: OriginPlace) => void) {
    super(origin)
  }

  protected override gone(): void {
    if (!this.placeHandedOn) this.leave(this.place)
  }
}

/** A connection handed over to a waiting request, or leave to open one (already counted). */
type Grant = PooledConnection | "open"

interface Waiter {
  /** Settled: granted, or gave up. */
  done: boolean
  readonly grant: (grant: Grant) => void
}

/** One origin's connections: those counted against the cap, the idle ones, the requests waiting. */
interface OriginPlace {
  readonly key: string
  /** Connections open or opening. */
  open: number
  /** Idle connections, the most recently used last. */
  readonly idle: Array<PooledConnection>
  /** Requests waiting for a connection, oldest first from `head`; settled ones are skipped. */
  readonly waiters: Array<Waiter | undefined>
  head: number
  /** Waiters not yet settled. */
  waiting: number
}

/** The oldest request still waiting, taken off the queue. */
const nextWaiter = (place: OriginPlace): Waiter | undefined => {
  while (place.head < place.waiters.length) {
    const waiter = place.waiters[place.head]
    place.waiters[place.head] = undefined
    place.head += 1
    if (waiter !== undefined && !waiter.done) {
      place.waiting -= 1
      return waiter
    }
  }
  place.waiters.length = 0
  place.head = 0
  return undefined
}

/** The most recently used idle connection that is still open. */
const takeIdle = (place: OriginPlace): PooledConnection | undefined => {
  for (let connection = place.idle.pop(); connection !== undefined; connection = place.idle.pop()) {
    if (!connection.closed && connection.socket !== undefined) {
      connection.socket.ref()
      return connection
    }
  }
  return undefined
}

/** Waits in turn for a connection handed back, or for a place to open one; undefined once the signal aborts. */
const waitInTurn = (place: OriginPlace, signal: AbortSignal): Promise<Grant | undefined> =>
  new Promise((resolve) => {
    const onAbort = () => {
      if (waiter.done) return
      waiter.done = true
      place.waiting -= 1
      resolve(undefined)
    }
    const waiter: Waiter = {
      done: false,
      grant: (grant) => {
        waiter.done = true
        signal.removeEventListener("abort", onAbort)
        resolve(grant)
      }
    }
    signal.addEventListener("abort", onAbort)
    place.waiters.push(waiter)
    place.waiting += 1
    // Settled waiters at the front are dropped from time to time rather than one by one.
    if (place.head > 1024 && place.head * 2 > place.waiters.length) {
      place.waiters.splice(0, place.head)
      place.head = 0
    }
  })

/** Closes the place's connections idle since `before` or earlier, oldest first; answers how many stay idle. */
const closeExpired = (place: OriginPlace, before: number): number => {
  const idle = place.idle
  // Oldest first: idle connections are taken from the end.
  const fresh = idle.findIndex((connection) => !connection.closed && connection.idleSince > before)
  const expired = fresh === -1 ? idle.splice(0) : idle.splice(0, fresh)
  for (const connection of expired) connection.discard()
  return idle.length
}

/** HTTP/1.1 requests over kept-alive connections, pooled per origin (see above). */
export class KeepAlivePool {
  private readonly idleMs: number
  private readonly timers: PoolTimers
  private readonly maxPerOrigin: number
  private readonly places = new Map<string, OriginPlace>()
  private closing = false
  /**
   * Idle connections are closed by a sweep, not by Bun's socket timeouts: those are checked on a
   * 4-second tick, so a 4-second timeout fired anywhere from 0 to 4 s after it was set, and a
   * connection could be closed moments after it was put back. It runs only while some are idle.
   */
  private stopSweep: (() => void) | undefined

  constructor(private readonly options: PoolOptions) {
    this.idleMs = options.idleMs ?? 4_000
    this.timers = options.timers ?? systemTimers
    this.maxPerOrigin = Math.max(1, options.maxPerOrigin)
  }

  private placeOf(origin: Origin): OriginPlace {
    const known = this.places.get(origin.key)
    if (known !== undefined) return known
    const place: OriginPlace = { key: origin.key, open: 0, idle: [], waiters: [], head: 0, waiting: 0 }
    this.places.set(origin.key, place)
    return place
  }

  /** A connection's socket is gone: its place goes to the oldest waiting request. */
  private readonly leave = (place: OriginPlace): void => {
    place.open -= 1
    const waiter = place.waiting > 0 ? nextWaiter(place) : undefined
    if (waiter !== undefined) {
      place.open += 1
      waiter.grant("open")
    } else if (place.open === 0 && place.waiting === 0 && this.places.get(place.key) === place) {
      this.places.delete(place.key)
    }
  }

  /** At the cap, idle connections mean nobody is waiting: closing the oldest frees a place. */
  private makeRoom(origin: Origin): void {
    const idle = this.placeOf(origin).idle
    while (idle.length > 0 && this.placeOf(origin).open >= this.maxPerOrigin) idle.shift()?.discard()
  }

  private readonly sweep = () => {
    const before = this.timers.now() - this.idleMs
    let idleLeft = 0
    for (const place of this.places.values()) idleLeft += closeExpired(place, before)
    if (idleLeft === 0 && this.stopSweep !== undefined) {
      this.stopSweep()
      this.stopSweep = undefined
    }
  }

  /** A new connection, already counted against the cap. */
  private connect(place: OriginPlace, origin: Origin, signal: AbortSignal): Promise<PooledConnection | ConnectFailure> {
    return openConnection(new PooledConnection(origin, place, this.leave), this.options.ca, signal)
  }

  /**
   * A connection for the request: an idle one, a new one while the origin is under its cap, or the
   * next one handed back or closed. `fresh` (a request sent again) leaves the idle ones, which may be
   * as stale as the one that just failed, and makes room by closing the oldest when at the cap.
   */
  private async acquire(
    origin: Origin,
    signal: AbortSignal,
    fresh: boolean
  ): Promise<PooledConnection | ConnectFailure> {
    if (!fresh) {
      const idle = takeIdle(this.placeOf(origin))
      if (idle !== undefined) return idle
    } else this.makeRoom(origin)
    // Looked up again: a place whose last connection just closed is forgotten.
    const place = this.placeOf(origin)
    if (place.open < this.maxPerOrigin) {
      place.open += 1
      return this.connect(place, origin, signal)
    }
    const grant = await waitInTurn(place, signal)
    if (grant === undefined) return ABORTED
    if (grant !== "open") return grant
    // The place came as the request's own deadline ended: it goes to the next in turn, unopened.
    if (signal.aborted) {
      this.leave(place)
      return ABORTED
    }
    return this.connect(place, origin, signal)
  }

  /** After a clean answer: the connection goes to the oldest waiting request, or idle. */
  private release(connection: PooledConnection): void {
    const place = connection.place
    if (this.closing || connection.closed || connection.socket === undefined) return connection.discard()
    const waiter = place.waiting > 0 ? nextWaiter(place) : undefined
    if (waiter !== undefined) return waiter.grant(connection)
    if (place.idle.length >= this.options.maxIdlePerOrigin) return connection.discard()
    connection.idleSince = this.timers.now()
    connection.socket.unref()
    place.idle.push(connection)
    // Idle connections do not keep the process alive, nor does their sweep.
    this.stopSweep ??= this.timers.every(Math.max(10, this.idleMs / 4), this.sweep)
  }

  /** One request: its answer, or why there is none. Never rejects. */
  readonly request = async (request: PoolRequest): Promise<PoolOutcome> => {
    let fresh = false
    for (;;) {
      if (request.signal.aborted) return ABORTED
      const connection = await this.acquire(request.origin, request.signal, fresh)
      if (!(connection instanceof PooledConnection)) return connection
      const kept = connection.used
      connection.used = true
      // Aborted while the connection was on its way: unused, it goes back.
      if (request.signal.aborted) {
        this.release(connection)
        return ABORTED
      }
      const outcome = await connection.exchange(request)
      if (outcome._tag === "Answer") {
        // The connection goes back to the pool only after a clean answer to a request sent whole.
        if (outcome.answer.reusable && connection.unwritten === undefined) this.release(connection)
        else connection.discard()
        return outcome
      }
      connection.discard()
      if (request.signal.aborted) return ABORTED
      if (outcome._tag === "Malformed") return outcome
      if (!kept || fresh || !outcome.beforeAnswer || !request.resendable) {
        return { _tag: "Unreachable", message: outcome.message }
      }
      fresh = true
    }
  }

  /**
   * A place under `origin`'s cap for an exchange another client makes: the Graph calls other than
   * the send go through fetch, which cannot cap its connections, and count against the same cap as
   * the send's connections here. Taken as a new connection would be (an idle one closed to make
   * room, or in turn behind the requests waiting), and counted until the returned function gives it
   * back; undefined once `signal` aborts first. It bounds the exchanges in flight: fetch may keep
   * idle sockets of its own past them.
   */
  readonly hold = async (origin: Origin, signal: AbortSignal): Promise<(() => void) | undefined> => {
    if (signal.aborted) return undefined
    this.makeRoom(origin)
    const place = this.placeOf(origin)
    if (place.open < this.maxPerOrigin) {
      place.open += 1
      return this.giveBack(place)
    }
    for (;;) {
      const grant = await waitInTurn(place, signal)
      if (grant === undefined) return undefined
      if (grant === "open") return this.giveBack(place)
      // A connection handed over: its place is kept for the exchange and the connection closed
      // (unless it closed on its way, its place then gone to the next in turn).
      if (!grant.closed) {
        grant.placeHandedOn = true
        grant.discard()
        return this.giveBack(grant.place)
      }
    }
  }

  /** Gives a held place back, once. */
  private giveBack(place: OriginPlace): () => void {
    let held = true
    return () => {
      if (!held) return
      held = false
      this.leave(place)
    }
  }

  /** Closes the idle connections; connections in use close when their exchange ends. */
  readonly close = (): void => {
    this.closing = true
    this.stopSweep?.()
    this.stopSweep = undefined
    for (const place of this.places.values()) for (const connection of place.idle.splice(0)) connection.discard()
  }
}

export const makeKeepAlivePool = (options: PoolOptions): KeepAlivePool => new KeepAlivePool(options)
