/** The dashboard's frame: sign-in, the header with its menu, and the page the route names. */
import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import { setToken, whenUnauthorized } from "./api.js"
import { liveFeed } from "./live.js"
import { BroadcastPage } from "./pages/Broadcast.js"
import { BroadcastsPage } from "./pages/Broadcasts.js"
import { DeliverySearchPage } from "./pages/Deliveries.js"
import { InstancesPage } from "./pages/Instances.js"
import { LiveEventsPage } from "./pages/LiveEvents.js"
import { MessagesPage } from "./pages/Messages.js"
import { OverviewPage } from "./pages/Overview.js"
import { SandboxPage } from "./pages/Sandbox.js"
import { SignInPage } from "./pages/SignIn.js"
import { TokensPage } from "./pages/Tokens.js"
import { WebhookPage } from "./pages/Webhook.js"
import { WebhooksPage } from "./pages/Webhooks.js"
import { focusNextPage, Link, navigate, useLocation } from "./router.js"
import { can, forgetSession, isSandbox, keepSession, kindLabel, type Session, storedSession } from "./session.js"
import type { TokenKind } from "./types.js"

interface Page {
  readonly path: string
  readonly title: string
  readonly allowed: (kind: TokenKind) => boolean
  readonly render: (session: Session) => ComponentChildren
}

// The first page a token may see is where the dashboard opens: the overview, or for a session token its api tokens.
const pages: ReadonlyArray<Page> = [
  { path: "/overview", title: "Overview", allowed: can.readStats, render: (s) => <OverviewPage kind={s.kind} /> },
  {
    path: "/tokens",
    title: "API tokens",
    allowed: can.listTokens,
    render: (s) => <TokensPage kind={s.kind} token={s.token} />
  },
  {
    path: "/instances",
    title: "Instances",
    allowed: can.listInstances,
    render: (s) => <InstancesPage kind={s.kind} />
  },
  { path: "/messages", title: "Messages", allowed: can.readMessages, render: (s) => <MessagesPage kind={s.kind} /> },
  {
    path: "/broadcasts",
    title: "Broadcasts",
    allowed: can.sendBroadcasts,
    render: (s) => <BroadcastsPage kind={s.kind} />
  },
  { path: "/webhooks", title: "Webhooks", allowed: can.manageWebhooks, render: (s) => <WebhooksPage kind={s.kind} /> },
  {
    path: "/deliveries",
    title: "Deliveries",
    allowed: can.manageWebhooks,
    render: (s) => <DeliverySearchPage kind={s.kind} />
  },
  { path: "/events", title: "Live events", allowed: can.watchEvents, render: (s) => <LiveEventsPage kind={s.kind} /> },
  {
    path: "/sandbox",
    title: "Sandbox",
    allowed: (kind) => can.simulateInbound(kind) && isSandbox(),
    render: (s) => <SandboxPage kind={s.kind} />
  }
]

const NotHere = (props: { readonly path: string; readonly session: Session }) => (
  <main id="main">
    <h1>Not available</h1>
    <p>
      There is no page at <code>{props.path}</code> for {kindLabel[props.session.kind].toLowerCase()}s.
    </p>
  </main>
)

const Routed = (props: { readonly session: Session; readonly path: string }) => {
  const allowed = pages.filter((page) => page.allowed(props.session.kind))
  const webhook = /^\/webhooks\/([^/]+)$/.exec(props.path)
  if (webhook?.[1] !== undefined && can.manageWebhooks(props.session.kind)) {
    return <WebhookPage id={decodeURIComponent(webhook[1])} />
  }
  const broadcast = /^\/broadcasts\/([^/]+)$/.exec(props.path)
  if (broadcast?.[1] !== undefined && can.sendBroadcasts(props.session.kind)) {
    return <BroadcastPage id={decodeURIComponent(broadcast[1])} />
  }
  const page = allowed.find((p) => p.path === props.path)
  if (page !== undefined) return <>{page.render(props.session)}</>
  return <NotHere path={props.path} session={props.session} />
}

const Header = (props: { readonly session: Session; readonly path: string; readonly onSignOut: () => void }) => {
  const [menuOpen, setMenuOpen] = useState(false)
  useEffect(() => setMenuOpen(false), [props.path])
  const allowed = pages.filter((page) => page.allowed(props.session.kind))
  return (
    <header class="top">
      <div class="top-bar">
        <Link to="/" class="brand">Messaging Hub</Link>
        <span class="who">{kindLabel[props.session.kind]}</span>
        <button
          type="button"
          class="menu-toggle secondary"
          aria-expanded={menuOpen}
          aria-controls="main-nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <button type="button" class="sign-out secondary" onClick={props.onSignOut}>Sign out</button>
      </div>
      <nav id="main-nav" class={menuOpen ? "main-nav open" : "main-nav"} aria-label="Pages">
        <ul>
          {allowed.map((page) => {
            const current = props.path === page.path || props.path.startsWith(`${page.path}/`)
            return (
              <li key={page.path}>
                <Link to={page.path} aria-current={current ? "page" : undefined}>{page.title}</Link>
              </li>
            )
          })}
        </ul>
      </nav>
    </header>
  )
}

const startFeed = (session: Session, onRefused: (message: string) => void) => {
  if (can.watchEvents(session.kind)) liveFeed.start(session.token, onRefused)
}

export const App = () => {
  const location = useLocation()
  const [session, setSession] = useState<Session | undefined>(() => {
    const stored = storedSession()
    if (stored !== undefined) setToken(stored.token)
    return stored
  })
  const [notice, setNotice] = useState<string | undefined>(undefined)

  const signOut = (reason?: string) => {
    focusNextPage()
    liveFeed.stop()
    forgetSession()
    setToken("")
    setSession(undefined)
    setNotice(reason)
  }

  useEffect(() => {
    whenUnauthorized((message) => signOut(`The hub refused the token (${message}): sign in again.`))
    if (session !== undefined) {
      startFeed(session, (message) => signOut(`The hub refused the token (${message}): sign in again.`))
    }
    return () => liveFeed.stop()
  }, [])

  // The dashboard itself opens on the first page the token may see.
  const first = session === undefined ? undefined : pages.find((page) => page.allowed(session.kind))
  useEffect(() => {
    if (first !== undefined && location.path === "/") navigate(first.path, { replace: true })
  }, [first?.path, location.path])

  useEffect(() => {
    const page = pages.find((p) => location.path.startsWith(p.path))
    document.title = session === undefined ? "Sign in · Messaging Hub" : `${page?.title ?? "Dashboard"} · Messaging Hub`
  }, [location.path, session])

  if (session === undefined) {
    return (
      <>
        <a class="skip" href="#main">Skip to content</a>
        <SignInPage
          notice={notice}
          onSignedIn={(signedIn) => {
            focusNextPage()
            keepSession(signedIn)
            setToken(signedIn.token)
            setNotice(undefined)
            setSession(signedIn)
            startFeed(signedIn, (message) => signOut(`The hub refused the token (${message}): sign in again.`))
          }}
        />
      </>
    )
  }
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <Header
        session={session}
        path={location.path}
        onSignOut={() => signOut("Signed out: the token was removed from this tab.")}
      />
      {location.path === "/" ? null : <Routed key={location.path} session={session} path={location.path} />}
    </>
  )
}
