/* A conversation with one identity agent, end to end (docs/envelopes.md, v1).

   The page holds sealed envelopes and public keys only (#talk-state). Here, in the browser:
   - the user's own X25519 + Ed25519 pairs come from the keystore (made on first use, kept in the
     encrypted vault and its Passkey backup) and their public halves are registered in this org
     (PUT /v1/identity/users/me/keys);
   - each message is sealed to the agent's current X25519 key and signed with the user's Ed25519
     key (window.AgentsEnvelope: the TypeScript SDK's envelope module, bundled from its lockfile),
     then POSTed; a 400 envelope_key_unknown (the agent rotated) re-reads its keys and seals again once;
   - replies are opened and verified as they arrive on the inbox stream, with the agent's keys
     (current and in grace verify; a key an emergency rotation revoked is refused), and shown with
     the key that signed them — or with the reason they were refused. */
(function () {
  "use strict";
  var A = window.Agents, KS = window.Keystore, K = window.AgentKeys, E = window.AgentsEnvelope;
  var root = document.getElementById("talk");
  if (!root || !E) return;
  var S = JSON.parse(document.getElementById("talk-state").textContent);
  var agent = S.agent, user = S.user;
  var agentPath = "/v1/identity/agents/" + encodeURIComponent(agent.agent_id);
  var list = document.getElementById("talk-messages");
  var statusLine = document.getElementById("talk-status");
  var errorBox = document.getElementById("talk-error");
  var form = document.getElementById("talk-form");
  var input = document.getElementById("talk-input");
  var agentKeys = S.agentKeys;
  var receiver = null, signing = null;
  var sentText = {};  // mid → text this page sealed (the agent's copy is the only other)
  var shown = {};  // inbox item ids already on the page
  var KEY = {};
  (A.vocab.keyStatus || []).forEach(function (w) { KEY[w] = w; });

  // What each refusal means here, in the words of this page (codes: REASONS of the SDKs).
  var HINT = {
    unknown_key: "it was sealed to a key this browser does not hold (your keys changed, or it was meant for another browser)",
    signer_key_revoked: "it was signed with a key the agent revoked (an emergency rotation): it is not trusted",
    unknown_signer: "it was signed with a key the agent never registered",
    bad_signature: "its signature does not verify: it was altered, or not signed by " + agent.display_name,
    cannot_decrypt: "its ciphertext does not decrypt: it was altered, or sealed for someone else",
    not_addressed_to_you: "it is addressed to someone else",
    sender_mismatch: "it claims another sender than the agent that sent it",
    replayed: "it was already received once (a replay)",
    stale: "it is dated outside the accepted window",
    malformed: "it is not a well-formed envelope",
    unsupported_version: "it is not a v1 envelope"
  };

  function say(text) { statusLine.textContent = text || ""; }
  function fail(text) { errorBox.textContent = text; errorBox.hidden = !text; }
  function short(kid) { return kid ? kid.slice(0, 8) : "?"; }
  function bubble(cls, who, text, seal, data) {
    var li = A.el("li", Object.assign({ class: cls }, data || {}), [A.el("div", { class: "who", text: who }), A.el("div", { class: "bubble", text: text })]);
    if (seal) li.appendChild(A.el("div", { class: "seal", text: seal }));
    list.appendChild(li);
    list.scrollTop = list.scrollHeight;
    return li;
  }

  function keyOfAgent(kid) {
    for (var i = 0; i < agentKeys.length; i++) if (agentKeys[i].signing_kid === kid) return agentKeys[i];
    return null;
  }

  function refreshAgentKeys() {
    return A.api("GET", agentPath + "/keys").then(function (res) {
      if (!res.ok) throw new Error(A.errorText(res));
      agentKeys = res.body.keys;
      return agentKeys;
    });
  }

  function signer(sender, skid) {
    if (sender.type !== "agent" || sender.id !== agent.agent_id) return null;
    var found = keyOfAgent(skid);
    var got = found ? Promise.resolve(found) : refreshAgentKeys().then(function () { return keyOfAgent(skid); });
    return got.then(function (k) { return k ? { publicKey: E.fromBase64(k.signing_public_key), status: k.status } : null; });
  }

  /* ---- the user's keys: keystore → registered in this org ---- */

  function importPair(entry) {
    return Promise.all([E.importPrivateJwk(entry.x25519.privateJwk), E.importPrivateJwk(entry.ed25519.privateJwk)].concat(
      (entry.previous || []).map(function (p) { return E.importPrivateJwk(p.privateJwk); })));
  }

  function ensureKeys() {
    var entry = KS.userKeys(user);
    var made = entry ? Promise.resolve(entry) : K.generate().then(function (k) { return KS.setUserKeys(user, k); });
    return made.then(function (keys) {
      var current = S.myKeys.filter(function (k) { return k.status === KEY.current; })[0];
      var registered = current && current.public_key === keys.x25519.publicKey && current.signing_public_key === keys.ed25519.publicKey;
      var put = registered ? Promise.resolve() : A.api("PUT", "/v1/identity/users/me/keys", { public_key: keys.x25519.publicKey, signing_public_key: keys.ed25519.publicKey })
        .then(function (res) { if (!res.ok) throw new Error("your keys could not be registered: " + A.errorText(res)); S.myKeys = res.body.keys; });
      return put.then(function () { return importPair(keys); });
    }).then(function (pairs) {
      signing = pairs[1];
      var decryption = [pairs[0]].concat(pairs.slice(2)).map(function (p) { return { privateKey: p.privateKey, publicKey: p.publicKey }; });
      receiver = new E.Receiver({ me: { type: "user", id: user }, keys: decryption, signer: signer, replay: new E.ReplayWindow(S.retentionSeconds) });
    });
  }

  /* ---- showing envelopes ---- */

  function reason(err) {
    var code = err && err.code;
    return code && HINT[code] ? "Cannot open this message: " + HINT[code] + "." : "Cannot open this message: " + String((err && err.message) || err);
  }

  function showReply(view, itemId) {
    var data = { "data-envelope": view.envelope_id, "data-mid": view.message_id || "" };
    if (itemId) data["data-item"] = itemId;
    return receiver.open(view.envelope, { sender: { type: "agent", id: agent.agent_id } }).then(function (opened) {
      var key = keyOfAgent(opened.signerKid);
      var li = bubble("agent verified", agent.display_name, opened.text,
        "signed by " + agent.display_name + " · key " + short(opened.signerKid) + (key && key.status === KEY.grace ? " (in grace after a rotation)" : ""), data);
      li.dataset.verified = "1";
      li.dataset.signer = opened.signerKid;
    }, function (err) {
      var li = bubble("agent refused", agent.display_name, reason(err), "refused · " + (err && err.code || "error"), data);
      li.dataset.refused = (err && err.code) || "error";
    });
  }

  function showSent(view) {
    var text = view.message_id && sentText[view.message_id];
    var li = bubble("user", "You", text || "Sealed for " + agent.display_name + " — only it can read this copy.",
      "sealed to key " + short(view.envelope ? E.parse(view.envelope).header.rkid : "") + " · signed by you", { "data-envelope": view.envelope_id, "data-mid": view.message_id || "" });
    if (!text) li.classList.add("sealed");
  }

  function showAlert(item) {
    var s = item.system || {}, d = s.data || {};
    var text = s.code === "agent.keys_revoked"
      ? "Security alert: " + (d.display_name || agent.display_name) + "'s token and keys were revoked by an emergency rotation" + (d.revoked_at ? " at " + A.fmtTime(d.revoked_at) : "") +
        ". Replies signed with the old key are refused; new messages go to its new key once it registers one."
      : "Security alert (" + s.code + "): " + (d.display_name || agent.display_name) + " was deleted by its creator; this conversation has ended.";
    bubble("system", "Platform", text, null, { "data-alert": s.code || "" });
  }

  /* Items in order, one at a time (opening is asynchronous; the order is the conversation's). */
  var chain = Promise.resolve();
  function enqueue(work) { chain = chain.then(work).catch(function (err) { fail(String(err.message || err)); }); return chain; }

  function onInboxItem(item) {
    if (item.agent_id !== agent.agent_id || shown[item.id]) return;
    shown[item.id] = true;
    enqueue(function () {
      if (item.system) { showAlert(item); return refreshAgentKeys(); }
      if (item.envelope) return showReply(item.envelope, item.id);
    });
  }

  /* ---- sending ---- */

  function currentAgentKey() {
    return agentKeys.filter(function (k) { return k.status === KEY.current; })[0] || null;
  }

  function sealAndPost(text, retried) {
    var key = currentAgentKey();
    if (!key && !retried) return refreshAgentKeys().then(function () { return sealAndPost(text, true); });
    if (!key) {
      return Promise.reject(new Error(agent.display_name + " has no current key (its keys were revoked by an emergency rotation and it has not registered new ones): the message was not sent."));
    }
    var mid = E.newMid();
    return E.seal({ body: E.textBody(text), sender: { type: "user", id: user }, recipient: { type: "agent", id: agent.agent_id },
      recipientPublicKey: E.fromBase64(key.public_key), signingKey: signing.privateKey, signingPublicKey: signing.publicKey, mid: mid }).then(function (envelope) {
      sentText[mid] = text;
      return A.api("POST", agentPath + "/messages", { envelope: envelope }).then(function (res) {
        if (res.ok) return { view: { envelope_id: res.body.envelope_id, message_id: mid, envelope: envelope }, res: res };
        if (!retried && res.body && res.body.code === "envelope_key_unknown" && res.body.party === "recipient") {
          say(agent.display_name + "'s key changed: sealing again to its current key…");
          return refreshAgentKeys().then(function () { return sealAndPost(text, true); });
        }
        throw new Error(A.errorText(res));
      });
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value;
    if (!text.trim()) return;
    fail("");
    var button = document.getElementById("talk-send");
    button.disabled = true;
    input.value = "";  // free for the next message while this one is sealed and sent
    sealAndPost(text, false).then(function (out) {
      say("Sent, sealed to " + agent.display_name + "'s key " + short(E.parse(out.view.envelope).header.rkid) + ".");
      showSent(out.view);
    }, function (err) {
      if (!input.value) input.value = text;  // not sent: it is the user's to fix and resend (unless they typed on)
      fail(String(err.message || err));
    }).then(function () { button.disabled = false; A.refocus(input); });
  });

  /* ---- start: keystore, keys, history, live ---- */

  function live() {
    if (!window.EventSource) return;
    var source = new EventSource("/v1/identity/inbox/stream?lastEventId=" + encodeURIComponent(S.inboxHead));
    source.addEventListener(A.vocab.enums.InboxStreamFrame.INBOX, function (e) { onInboxItem(JSON.parse(e.data)); });
  }

  function ready() {
    root.dataset.state = "ready";
    document.getElementById("talk-unlock").hidden = true;
    form.hidden = false;
    say("Your keys are ready: messages are sealed here, replies opened here.");
    S.history.forEach(function (view) {
      enqueue(function () { return view.direction === "to_user" ? showReply(view) : showSent(view); });
    });
    S.alerts.forEach(function (item) { shown[item.id] = true; enqueue(function () { showAlert(item); }); });
    enqueue(function () { root.dataset.loaded = "1"; live(); });
  }

  function start() {
    return ensureKeys().then(ready, function (err) { fail(String(err.message || err)); });
  }

  var unlockForm = document.getElementById("talk-unlock-form");
  unlockForm.addEventListener("submit", function (e) {
    e.preventDefault();
    var password = unlockForm.elements.password.value;
    fail("");
    KS.status().then(function (s) { return s === "none" ? KS.create(password) : KS.unlock(password); }).then(function () {
      unlockForm.reset();
      return start();
    }, function (err) { fail(err instanceof KS.WrongPassword ? "Wrong password: the keystore stays locked." : String(err.message || err)); });
  });

  document.getElementById("talk-add").addEventListener("click", function () {
    A.api("POST", agentPath + "/relations").then(function (res) {
      if (!res.ok) return fail(A.errorText(res));
      document.getElementById("talk-relation").hidden = true;
    });
  });
  document.getElementById("talk-relation").hidden = !!S.related;

  KS.status().then(function (s) {
    if (s === "unlocked") return start();
    root.dataset.state = "locked";
    document.getElementById("talk-unlock").hidden = false;
    document.getElementById("talk-unlock-why").textContent = s === "none"
      ? "Your keys live only in this browser. Choose a protection password for its keystore (8+ characters): your key pair is made here and only its public half is registered."
      : "Unlock your keystore: your private keys never leave this browser.";
    unlockForm.querySelector("button").textContent = s === "none" ? "Create keystore" : "Unlock";
  });
})();
