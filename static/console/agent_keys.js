/* An agent's keys, made in this browser with WebCrypto (spec 001 step 4): an X25519 key pair
   (encryption) and an Ed25519 key pair (signing), and for a webhook agent its Standard Webhooks
   secret. Only the public halves (raw 32 bytes, base64) ever leave the browser, to
   POST /v1/identity/agents/:id/keys/register. Exposed as window.AgentKeys. */
(function () {
  "use strict";

  function b64(buffer) {
    var bytes = new Uint8Array(buffer), s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s);
  }

  function unb64(text) {
    var s = atob(text), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }

  /* Resolve {x25519, ed25519}: each {publicKey: base64 raw, privateJwk: JWK}. Rejects when this
     browser's WebCrypto lacks X25519 or Ed25519 (Chromium has both since 137). */
  function generate() {
    var x = crypto.subtle.generateKey({ name: "X25519" }, true, ["deriveBits"]);
    var e = crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
    return Promise.all([x, e]).then(function (pairs) {
      return Promise.all([
        crypto.subtle.exportKey("raw", pairs[0].publicKey), crypto.subtle.exportKey("jwk", pairs[0].privateKey),
        crypto.subtle.exportKey("raw", pairs[1].publicKey), crypto.subtle.exportKey("jwk", pairs[1].privateKey)
      ]);
    }).then(function (parts) {
      return { x25519: { publicKey: b64(parts[0]), privateJwk: parts[1] }, ed25519: { publicKey: b64(parts[2]), privateJwk: parts[3] } };
    });
  }

  /* A Standard Webhooks secret: "whsec_" + base64 of 32 random bytes. */
  function webhookSecret() {
    var bytes = new Uint8Array(32);
    crypto.getRandomValues(bytes);
    return "whsec_" + b64(bytes);
  }

  window.AgentKeys = { generate: generate, webhookSecret: webhookSecret, b64: b64, unb64: unb64 };
})();
