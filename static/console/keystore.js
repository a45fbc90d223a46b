/* The local keystore and its backup (spec 001 step 7). Exposed as window.Keystore.

   Vault: the key bundle `{v: 1, agents: {<agent_id>: {agent_id, display_name, connection_mode,
   x25519: {publicKey, privateJwk}, ed25519: {…}, webhook_secret?, saved_at}}}` encrypted under
   the protection password — PBKDF2-SHA-256 (ITERATIONS) → AES-GCM-256, random salt and IV — and
   kept in IndexedDB (database "agents-keystore", store "kv", key "vault"). Unlocked, the bundle
   and its key live in this page's memory only; locking forgets both.

   Backup, `encrypted_backup_blob_v2` (PUT/GET /v1/identity/backup, opaque to the server): base64
   of JSON `{v: 2, kdf, iv, ciphertext, …}` where the AES-GCM key is
   - kdf "webauthn-prf": HKDF-SHA-256 of a Passkey's PRF output (WebAuthn `prf` extension,
     `eval.first` = prf_salt) for credential `credential_id`, or
   - kdf "pbkdf2-sha256": the password path, `salt` and `iterations` (browsers or authenticators
     without PRF).
   The agent token is never in the bundle: a lost token is rotated, not restored.
   The bundle also holds the signed-in user's own key pairs, `users: {<username>: {x25519, ed25519,
   previous: [<older x25519 pairs>], saved_at}}`: the conversations page (talk.js) seals, signs
   and opens with them, and registers their public halves (PUT /v1/identity/users/me/keys). */
(function () {
  "use strict";
  var A = window.Agents, K = window.AgentKeys;
  var ITERATIONS = 310000;
  var DB = "agents-keystore", STORE = "kv";
  var state = { key: null, salt: null, bundle: null };

  function WrongPassword() { this.message = "wrong password"; }

  function db() {
    return new Promise(function (resolve, reject) {
      var open = indexedDB.open(DB, 1);
      open.onupgradeneeded = function () { open.result.createObjectStore(STORE); };
      open.onsuccess = function () { resolve(open.result); };
      open.onerror = function () { reject(open.error); };
    });
  }

  function idb(mode, work) {
    return db().then(function (conn) {
      return new Promise(function (resolve, reject) {
        var tx = conn.transaction(STORE, mode);
        var req = work(tx.objectStore(STORE));
        tx.oncomplete = function () { conn.close(); resolve(req ? req.result : undefined); };
        tx.onerror = function () { conn.close(); reject(tx.error); };
      });
    });
  }
  function get(name) { return idb("readonly", function (s) { return s.get(name); }); }
  function put(name, value) { return idb("readwrite", function (s) { return s.put(value, name); }); }

  function random(n) { var b = new Uint8Array(n); crypto.getRandomValues(b); return b; }
  var enc = new TextEncoder(), dec = new TextDecoder();

  function passwordKey(password, salt, iterations) {
    return crypto.subtle.importKey("raw", enc.encode(password), "PBKDF2", false, ["deriveKey"]).then(function (base) {
      return crypto.subtle.deriveKey({ name: "PBKDF2", hash: "SHA-256", salt: salt, iterations: iterations }, base,
        { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
    });
  }

  function prfKey(prfOutput, salt) {
    return crypto.subtle.importKey("raw", prfOutput, "HKDF", false, ["deriveKey"]).then(function (base) {
      return crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: salt, info: enc.encode("agents encrypted_backup_blob_v2") }, base,
        { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
    });
  }

  function seal(key, value) {
    var iv = random(12);
    return crypto.subtle.encrypt({ name: "AES-GCM", iv: iv }, key, enc.encode(JSON.stringify(value))).then(function (ct) {
      return { iv: K.b64(iv), ciphertext: K.b64(ct) };
    });
  }

  function open(key, box) {
    return crypto.subtle.decrypt({ name: "AES-GCM", iv: K.unb64(box.iv) }, key, K.unb64(box.ciphertext)).then(
      function (pt) { return JSON.parse(dec.decode(pt)); },
      function () { throw new WrongPassword(); });
  }

  /* Resolve "none" (no vault here), "locked" or "unlocked". */
  function status() {
    if (state.bundle) return Promise.resolve("unlocked");
    return get("vault").then(function (vault) { return vault ? "locked" : "none"; });
  }

  function write() {
    return seal(state.key, state.bundle).then(function (box) {
      return put("vault", { v: 1, kdf: "pbkdf2-sha256", iterations: ITERATIONS, salt: K.b64(state.salt), iv: box.iv, ciphertext: box.ciphertext });
    });
  }

  /* Make a new vault holding `bundle` (default empty) under `password`; it stays unlocked. */
  function create(password, bundle) {
    if (!password || password.length < 8) return Promise.reject(new Error("the protection password needs at least 8 characters"));
    state.salt = random(16);
    return passwordKey(password, state.salt, ITERATIONS).then(function (key) {
      state.key = key;
      state.bundle = bundle || { v: 1, agents: {} };
      return write();
    });
  }

  /* Open the vault with `password`; rejects WrongPassword (nothing changes) or "no keystore". */
  function unlock(password) {
    return get("vault").then(function (vault) {
      if (!vault) throw new Error("no keystore in this browser");
      var salt = K.unb64(vault.salt);
      return passwordKey(password || "", salt, vault.iterations).then(function (key) {
        return open(key, vault).then(function (bundle) { state.key = key; state.salt = salt; state.bundle = bundle; return bundle; });
      });
    });
  }

  function lock() { state.key = null; state.salt = null; state.bundle = null; }

  /* Add one agent's keys to the unlocked vault and save it (encrypted). */
  function add(entry) {
    if (!state.bundle) return Promise.reject(new Error("the keystore is locked"));
    state.bundle.agents[entry.agent_id] = Object.assign({ saved_at: new Date().toISOString() }, entry);
    return write();
  }

  /* The user's key entry {x25519, ed25519, previous} in the unlocked vault, or null. */
  function userKeys(username) {
    return state.bundle && state.bundle.users && state.bundle.users[username] ? state.bundle.users[username] : null;
  }

  /* Make `keys` ({x25519, ed25519}, as AgentKeys.generate gives) the user's current pair; the
     previous X25519 pair is kept (replies sealed to it, in grace, still open). Saves the vault. */
  function setUserKeys(username, keys) {
    if (!state.bundle) return Promise.reject(new Error("the keystore is locked"));
    state.bundle.users = state.bundle.users || {};
    var old = state.bundle.users[username];
    var previous = old ? [old.x25519].concat(old.previous || []).slice(0, 5) : [];
    state.bundle.users[username] = { x25519: keys.x25519, ed25519: keys.ed25519, previous: previous, saved_at: new Date().toISOString() };
    return write().then(function () { return state.bundle.users[username]; });
  }

  function agents() { return state.bundle ? Object.keys(state.bundle.agents).map(function (k) { return state.bundle.agents[k]; }) : []; }

  /* The PRF output (ArrayBuffer) of the Passkey `credentialId` (base64) for `salt`, or a new Passkey when none. */
  function prf(credentialId, salt) {
    var eval_ = { prf: { eval: { first: salt } } };
    var created = credentialId ? Promise.resolve(K.unb64(credentialId)) : navigator.credentials.create({ publicKey: {
      rp: { name: "Agents console", id: location.hostname },
      user: { id: random(16), name: document.body.dataset.user || "user", displayName: document.body.dataset.user || "user" },
      challenge: random(32), pubKeyCredParams: [{ type: "public-key", alg: -7 }, { type: "public-key", alg: -257 }],
      authenticatorSelection: { residentKey: "required", userVerification: "required" }, extensions: eval_
    } }).then(function (cred) {
      var results = cred.getClientExtensionResults().prf;
      if (!results || results.enabled === false) throw new Error("this authenticator has no PRF: back up with the password instead");
      return new Uint8Array(cred.rawId);
    });
    return created.then(function (rawId) {
      return navigator.credentials.get({ publicKey: {
        challenge: random(32), rpId: location.hostname, allowCredentials: [{ type: "public-key", id: rawId }], userVerification: "required", extensions: eval_
      } }).then(function (assertion) {
        var results = assertion.getClientExtensionResults().prf;
        if (!results || !results.results || !results.results.first) throw new Error("the Passkey gave no PRF result: back up with the password instead");
        return { credentialId: K.b64(rawId), output: results.results.first };
      });
    });
  }

  function upload(blob) {
    return A.api("PUT", "/v1/identity/backup", { encrypted_backup_blob_v2: btoa(JSON.stringify(blob)) }).then(function (res) {
      if (!res.ok) throw new Error(A.errorText(res));
      return res.body;
    });
  }

  /* Encrypt the unlocked bundle with a Passkey's PRF and upload it; resolves the server's answer. */
  function backupWithPasskey() {
    if (!state.bundle) return Promise.reject(new Error("unlock the keystore first"));
    var salt = random(32), hkdfSalt = random(16);
    return get("passkey").then(function (known) {
      return prf(known && known.credentialId, salt);
    }).then(function (got) {
      return put("passkey", { credentialId: got.credentialId }).then(function () { return prfKey(got.output, hkdfSalt); }).then(function (key) {
        return seal(key, state.bundle);
      }).then(function (box) {
        return upload({ v: 2, kdf: "webauthn-prf", credential_id: got.credentialId, prf_salt: K.b64(salt), hkdf_salt: K.b64(hkdfSalt), iv: box.iv, ciphertext: box.ciphertext });
      });
    });
  }

  /* Encrypt the unlocked bundle with a key derived from `password` and upload it (no PRF needed). */
  function backupWithPassword(password) {
    if (!state.bundle) return Promise.reject(new Error("unlock the keystore first"));
    if (!password || password.length < 8) return Promise.reject(new Error("the backup password needs at least 8 characters"));
    var salt = random(16);
    return passwordKey(password, salt, ITERATIONS).then(function (key) { return seal(key, state.bundle); }).then(function (box) {
      return upload({ v: 2, kdf: "pbkdf2-sha256", iterations: ITERATIONS, salt: K.b64(salt), iv: box.iv, ciphertext: box.ciphertext });
    });
  }

  /* Fetch the backup, open it (the Passkey, or `backupPassword` for a password backup) and make it
     this browser's vault under `newPassword`; resolves the restored bundle. */
  function restore(newPassword, backupPassword) {
    return A.api("GET", "/v1/identity/backup").then(function (res) {
      if (!res.ok) throw new Error(res.status === 404 ? "there is no backup" : A.errorText(res));
      var blob = JSON.parse(atob(res.body.encrypted_backup_blob_v2));
      if (blob.v !== 2) throw new Error("unknown backup version");
      var key = blob.kdf === "webauthn-prf"
        ? prf(blob.credential_id, K.unb64(blob.prf_salt)).then(function (got) {
          return put("passkey", { credentialId: got.credentialId }).then(function () { return prfKey(got.output, K.unb64(blob.hkdf_salt)); });
        })
        : passwordKey(backupPassword || "", K.unb64(blob.salt), blob.iterations);
      return key.then(function (k) { return open(k, blob); });
    }).then(function (bundle) {
      return create(newPassword, bundle).then(function () { return bundle; });
    });
  }

  window.Keystore = { status: status, create: create, unlock: unlock, lock: lock, add: add, agents: agents, WrongPassword: WrongPassword,
    userKeys: userKeys, setUserKeys: setUserKeys,
    backupWithPasskey: backupWithPasskey, backupWithPassword: backupWithPassword, restore: restore };
})();
