#!/usr/bin/env node
/**
 * The echo agent: "hello" → "echo: hello", sealed to the user and signed by the agent.
 *
 *   node dist/examples/echo-agent.js agent.json --mode websocket
 *   node dist/examples/echo-agent.js agent.json --mode webhook --port 8787
 *
 * `agent.json` is the file the console offers when it creates the agent (or set AGENT_CREDENTIALS /
 * the AGENT_* variables). `--register` registers the file's public keys first (after a rotation).
 */
import { IdentityAgent, credentialsFromEnv, loadCredentials } from "../src/index.js";

function option(name: string, fallback?: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

async function main(): Promise<void> {
  const file = process.argv[2] && !process.argv[2].startsWith("--") ? process.argv[2] : undefined;
  const credentials = file ? await loadCredentials(file) : await credentialsFromEnv();
  const mode = option("mode", credentials.webhookSecret ? "webhook" : "websocket");
  const agent = new IdentityAgent(credentials, {
    onMessage: (m) => `echo: ${m.text}`,
    log: (line) => console.log(`[echo ${credentials.agentId}] ${line}`),
  });
  if (process.argv.includes("--register")) await agent.registerKeys();
  if (mode === "webhook") {
    const port = Number(option("port", "8787"));
    await agent.listen(port, option("host", "127.0.0.1"));
    console.log(`[echo ${credentials.agentId}] listening for webhooks on port ${port}`);
  } else {
    await agent.connect();
  }
  const stop = (): void => { agent.close(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((err) => { console.error(err); process.exit(1); });
