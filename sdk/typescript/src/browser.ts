/**
 * The browser build of the envelope module (`window.AgentsEnvelope`), bundled by esbuild into
 * static/console/vendor/agents-envelope.js from this package's pinned lockfile (`npm run bundle:browser`).
 * The console seals, signs, opens and verifies with exactly the code the TypeScript SDK ships.
 */
import * as envelope from "./envelope.js";
import { KeyPairs, exportPrivateJwk, importPrivateJwk } from "./keys.js";

(globalThis as unknown as { AgentsEnvelope: unknown }).AgentsEnvelope = { ...envelope, KeyPairs, importPrivateJwk, exportPrivateJwk };
