/**
 * A request's route pattern (`/api/webhooks/:id`, never the path with its ids), for the request
 * metrics and each route's body limit. The edge wraps HttpApi's router, so the route it matched is not known there; the same
 * patterns are matched again by the router HttpApi itself uses (find-my-way-ts, with its default
 * settings, as HttpRouter's), so both agree on every path. About 0.15 µs a request (measured over
 * HubApi's 48 routes).
 */
import { HttpApi, type HttpApiGroup } from "@effect/platform"
import * as FindMyWay from "find-my-way-ts"

/** A route: its method and its pattern as HttpApi writes it. */
export interface RouteOf {
  readonly method: string
  readonly path: FindMyWay.PathInput
}

/** Every endpoint of an HttpApi, as a route. */
export const apiRoutes = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>
): ReadonlyArray<RouteOf> => {
  const routes: Array<RouteOf> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      routes.push({ method: endpoint.method, path: endpoint.path })
    }
  })
  return routes
}

const METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/**
 * Finds the value bound to a request's route: `bind(method, pattern)` is called once per route
 * (and for HEAD of each GET route, which HttpRouter answers as GET), `unmatched(method)` once per
 * method for what matches none (an unknown method is `OTHER`).
 */
export const makeRouteFinder = <A>(
  routes: ReadonlyArray<RouteOf>,
  bind: (method: string, pattern: string) => A,
  unmatched: (method: string) => A
) => {
  const router = FindMyWay.make<A>()
  const bound = new Set<string>()
  for (const { method, path } of routes) {
    if (bound.has(`${method} ${path}`)) continue
    bound.add(`${method} ${path}`)
    router.on(method, path, bind(method, path))
  }
  for (const { method, path } of routes) {
    if (method === "GET" && !bound.has(`HEAD ${path}`)) {
      bound.add(`HEAD ${path}`)
      router.on("HEAD", path, bind("HEAD", path))
    }
  }
  const others = new Map<string, A>()
  const otherwise = (method: string) => {
    const name = METHODS.has(method) ? method : "OTHER"
    let value = others.get(name)
    if (value === undefined) {
      value = unmatched(name)
      others.set(name, value)
    }
    return value
  }
  return (method: string, url: string): A => {
    const query = url.indexOf("?")
    return router.find(method, query === -1 ? url : url.slice(0, query))?.handler ?? otherwise(method)
  }
}
