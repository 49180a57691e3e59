/** Client-side routes under /dashboard (the hub answers the page for each), with the History API. */
import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"

const BASE = "/dashboard"

export interface Location {
  /** The path below /dashboard, such as `/webhooks/whk_1` (`/` for the dashboard itself). */
  readonly path: string
  readonly query: URLSearchParams
}

const current = (): Location => {
  const path = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) : "/"
  return { path: path === "" ? "/" : path, query: new URLSearchParams(window.location.search) }
}

const listeners = new Set<() => void>()

/**
 * Whether the page changed in place since the dashboard loaded: then a new page's title takes the
 * focus (as a page load would reset it). On the first load focus stays at the top, by the skip link.
 */
export let routedInPlace = false

/** The next page takes the focus (after signing in or out, which change the page without a route). */
export const focusNextPage = () => {
  routedInPlace = true
}

export const navigate = (to: string, options: { readonly replace?: boolean } = {}) => {
  routedInPlace = true
  const url = `${BASE}${to === "/" ? "" : to}`
  if (options.replace === true) history.replaceState(null, "", url)
  else history.pushState(null, "", url)
  for (const listener of listeners) listener()
}

export const useLocation = (): Location => {
  const [location, setLocation] = useState(current)
  useEffect(() => {
    const update = () => {
      routedInPlace = true
      setLocation(current())
    }
    listeners.add(update)
    window.addEventListener("popstate", update)
    return () => {
      listeners.delete(update)
      window.removeEventListener("popstate", update)
    }
  }, [])
  return location
}

/** A link within the dashboard: a real `<a href>` (opens in a new tab, keyboard and screen readers as usual), routed in place. */
export const Link = (props: {
  readonly to: string
  readonly children: ComponentChildren
  readonly class?: string
  readonly "aria-current"?: "page" | undefined
}) => {
  const onClick = (event: MouseEvent) => {
    if (
      event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey
    ) return
    event.preventDefault()
    navigate(props.to)
  }
  return (
    <a
      href={`${BASE}${props.to === "/" ? "" : props.to}`}
      class={props.class}
      aria-current={props["aria-current"]}
      onClick={onClick}
    >
      {props.children}
    </a>
  )
}
