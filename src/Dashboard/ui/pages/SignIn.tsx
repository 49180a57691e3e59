import { useState } from "preact/hooks"
import { ErrorNote, PageTitle, useAction } from "../components.js"
import { type Session, signIn } from "../session.js"

export const SignInPage = (
  props: { readonly onSignedIn: (session: Session) => void; readonly notice: string | undefined }
) => {
  const [token, setToken] = useState("")
  const { error, busy, run } = useAction()
  const submit = (event: Event) => {
    event.preventDefault()
    void run(() => signIn(token.trim()), (session) => {
      props.onSignedIn(session)
      return undefined
    })
  }
  return (
    <main id="main" class="sign-in">
      <PageTitle lead="Sign in with a token: what you see and may do is what the API allows that token.">
        Messaging Hub
      </PageTitle>
      {props.notice === undefined ? null : <p class="note note-warn" role="status">{props.notice}</p>}
      <form class="card stack" onSubmit={submit}>
        <div class="field">
          <label for="token">Token</label>
          <input
            id="token"
            name="token"
            type="password"
            class="mono"
            autoComplete="off"
            spellcheck={false}
            required
            value={token}
            aria-describedby="token-help"
            onInput={(e) => setToken(e.currentTarget.value)}
          />
          <p id="token-help" class="help">
            A session token (printed by the sandbox when the hub first starts, or by{" "}
            <code>hub session create</code>) manages api tokens; an organization token reaches every instance of the
            organization; an instance token one instance. It is kept in this browser tab only, until you sign out or
            close the tab.
          </p>
        </div>
        <ErrorNote error={error} prefix="Sign-in refused:" />
        <button type="submit" disabled={busy || token.trim() === ""}>{busy ? "Signing in…" : "Sign in"}</button>
      </form>
    </main>
  )
}
