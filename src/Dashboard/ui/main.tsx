/** The dashboard's entry point (bundled by src/Dashboard/build.ts). */
import { render } from "preact"
import { App } from "./App.js"
import "./app.css"

const root = document.getElementById("app")
if (root !== null) render(<App />, root)
