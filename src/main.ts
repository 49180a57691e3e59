/** The `hub` binary (`bun build --compile src/main.ts`; `npm start` is `hub serve`): the command line of Cli/Main.ts. */
import { runHub } from "./Cli/Main.js"

runHub(process.argv)
