/** agents-identity-sdk: envelopes v1, keys, credentials, the identity API, webhooks, the WebSocket, and IdentityAgent. */
export * from "./envelope.js";
export * from "./manifest.js";
export * from "./keys.js";
export * from "./credentials.js";
export * from "./client.js";
export * from "./webhooks.js";
export * from "./ws.js";
export * from "./agent.js";
