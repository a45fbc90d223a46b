/* Artifact forms and cards of the system agent in the chat page (spec 001 steps 1–9).

   `Artifacts.render(message, ctx)` returns the element for one artifact message (an op
   `{name: "artifact", args: message}`); ctx = {conversationId(), send(text)}. Every check and
   call goes through window.ClientAction (allow-list, auth, JSONPath, reply fields); a refused
   form is not shown and is reported there. Secrets (agent token, private keys, webhook secret)
   are shown once in a card that is removed when dismissed; they are never sent to the system
   agent, never stored by the server, and kept only in the encrypted keystore. */
(function () {
  "use strict";
  var A = window.Agents, CA = window.ClientAction, K = window.AgentKeys, KS = window.Keystore;
  var el = A.el;
  var ST = {};
  (A.vocab.artifactSubtype || []).forEach(function (s) { ST[s] = s; });

  function card(subtype, title, children) {
    return el("div", { class: "artifact-card", "data-artifact": subtype }, [el("div", { class: "artifact-title", text: title })].concat(children));
  }

  function errorLine() { return el("p", { class: "err artifact-error", role: "alert", hidden: "hidden" }); }
  function say(node, text) { node.textContent = text; node.hidden = !text; }
  function apiError(res) { return A.errorText(res) + (res.body && res.body.fields ? " " + JSON.stringify(res.body.fields) : ""); }

  function refused(result) {
    var r = result.refusal;
    return el("div", { class: "artifact-card refused", "data-refused": r.kind }, [
      el("p", { class: "muted small", text: "A form from the system agent was ignored by this client (" + r.kind + "): " + r.reason + "." })
    ]);
  }

  /* ---- schema-driven fields ---- */

  function field(name, rule, value) {
    var input;
    if (rule.type === "enum") {
      input = el("select", { name: name }, [el("option", { value: "", text: rule.required ? "choose…" : "—" })].concat(
        (rule.values || []).map(function (v) { return el("option", { value: v, text: v }); })));
    } else if (rule.type === "boolean") {
      input = el("input", { type: "checkbox", name: name });
      if (value === true) input.checked = true;
    } else if (name === "bio") {
      input = el("textarea", { name: name, rows: "2" });
    } else {
      input = el("input", { type: rule.type === "url" ? "url" : "text", name: name });
    }
    if (rule.type !== "boolean" && typeof value === "string") input.value = value;
    var label = name.replace(/_/g, " ") + (rule.required ? " *" : "");
    return el("label", { class: "artifact-field", "data-field": name }, [el("span", { text: label }), input, el("span", { class: "err small field-error", hidden: "hidden" })]);
  }

  function valuesOf(form, schema) {
    var out = {};
    Object.keys(schema).forEach(function (name) {
      var input = form.elements[name];
      if (!input) return;
      if (schema[name].type === "boolean") out[name] = !!input.checked;
      else if (input.value.trim() !== "") out[name] = name === "bio" ? input.value : input.value.trim();
    });
    return out;
  }

  function isUrl(value) { try { var u = new URL(value); return u.protocol === "https:" || u.protocol === "http:"; } catch (e) { return false; } }

  /* Spec 001 step 2: check the values against the schema here, before any call. Returns {name: message}. */
  function validate(schema, values) {
    var errors = {};
    Object.keys(schema).forEach(function (name) {
      var rule = schema[name], value = values[name];
      var requiredIf = rule.required_if && Object.keys(rule.required_if).every(function (k) { return values[k] === rule.required_if[k]; });
      if (value === undefined || value === "") {
        if (rule.required || requiredIf) errors[name] = "required";
        return;
      }
      if (rule.type === "boolean") return;
      if (rule.min && value.length < rule.min) errors[name] = "at least " + rule.min + " characters";
      else if (rule.max && value.length > rule.max) errors[name] = "at most " + rule.max + " characters";
      else if (rule.pattern && !new RegExp(rule.pattern).test(value)) errors[name] = "must match " + rule.pattern;
      else if (rule.type === "url" && !isUrl(value)) errors[name] = "must be an http(s) URL";
      else if (rule.type === "enum" && (rule.values || []).indexOf(value) < 0) errors[name] = "must be one of " + rule.values.join(", ");
      if (!errors[name] && rule.reserved_prefixes) {
        rule.reserved_prefixes.forEach(function (p) { if (!errors[name] && p && value.indexOf(p) === 0) errors[name] = "must not start with the reserved prefix '" + p + "'"; });
      }
    });
    return errors;
  }

  function showErrors(form, errors) {
    form.querySelectorAll(".field-error").forEach(function (n) { say(n, ""); });
    Object.keys(errors).forEach(function (name) {
      var slot = form.querySelector('[data-field="' + name + '"] .field-error');
      if (slot) say(slot, errors[name]);
    });
    return Object.keys(errors).length === 0;
  }

  function schemaForm(schema, values, submitText) {
    var form = el("form", { class: "artifact-form", novalidate: "novalidate" }, Object.keys(schema).map(function (name) { return field(name, schema[name], (values || {})[name]); }));
    Object.keys(schema).forEach(function (name) {
      if (schema[name].type === "enum" && values && values[name]) form.elements[name].value = values[name];
    });
    form.appendChild(el("div", { class: "actions" }, [el("button", { type: "submit", class: "primary", text: submitText })]));
    return form;
  }

  /* ---- the secrets, shown once ---- */

  function secretRow(label, name, value) {
    var id = "secret-" + name + "-" + Math.random().toString(36).slice(2, 8);
    var code = el("code", { id: id, class: "secret-value", "data-secret": name, text: value });
    var button = el("button", { type: "button", class: "small", text: "Copy" });
    button.addEventListener("click", function () {
      (navigator.clipboard ? navigator.clipboard.writeText(value) : Promise.reject()).then(
        function () { button.textContent = "Copied"; },
        function () { var r = document.createRange(); r.selectNodeContents(code); var s = getSelection(); s.removeAllRanges(); s.addRange(r); button.textContent = "Selected — press Ctrl+C"; });
    });
    return el("div", { class: "secret-row" }, [el("span", { class: "muted small", text: label }), code, button]);
  }

  function keystorePanel(entry) {
    var note = el("p", { class: "small keystore-note" });
    var password = el("input", { type: "password", name: "keystore_password", autocomplete: "new-password", placeholder: "protection password (8+ characters)" });
    var button = el("button", { type: "button", class: "small", text: "Save to keystore" });
    var box = el("div", { class: "keystore-save" }, [note, password, button]);
    function saved() { password.hidden = true; button.hidden = true; say(note, "✓ Saved, encrypted, in this browser's keystore. Back it up with a Passkey on the Keys page."); box.dataset.saved = "1"; }
    function save() {
      button.disabled = true;
      KS.status().then(function (s) {
        if (s === "unlocked") return KS.add(entry);
        if (s === "locked") return KS.unlock(password.value).then(function () { return KS.add(entry); });
        return KS.create(password.value).then(function () { return KS.add(entry); });
      }).then(saved, function (err) {
        say(note, err instanceof KS.WrongPassword ? "Wrong password: the keystore stays locked." : String(err.message || err));
        button.disabled = false;
      });
    }
    button.addEventListener("click", save);
    KS.status().then(function (s) {
      if (s === "unlocked") { save(); return; }
      say(note, s === "locked" ? "Unlock your keystore to keep these keys (encrypted, in this browser):" : "Choose a protection password for this browser's keystore:");
    });
    return box;
  }

  function secretsCard(title, rows, keystoreEntry) {
    var done = el("button", { type: "button", class: "primary", text: "I saved them — hide" });
    var node = el("div", { class: "artifact-card secrets", "data-secrets": "shown" }, [
      el("div", { class: "artifact-title", text: title }),
      el("p", { class: "alert warn", text: "Shown once. Copy them now: the platform keeps no copy. A lost agent token cannot be recovered — it must be rotated." })
    ].concat(rows, [keystoreEntry ? keystorePanel(keystoreEntry) : null, el("div", { class: "actions" }, [done])]));
    done.addEventListener("click", function () { node.replaceWith(el("p", { class: "muted small", "data-secrets": "hidden", text: "The secrets were shown once and are gone from this page." })); });
    return node;
  }

  function sendReply(plan, sources, ctx) {
    var message = CA.reply(plan, sources);
    return ctx.send(JSON.stringify(message));
  }

  /* ---- each subtype ---- */

  function creationForm(artifact, plan, ctx) {
    var form = schemaForm(artifact.schema || {}, artifact.values, "Create");
    var error = errorLine();
    var progress = el("p", { class: "muted small artifact-progress" });
    var node = card(artifact.subtype, artifact.title || "Create an agent", [form, error, progress]);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      say(error, "");
      var values = valuesOf(form, artifact.schema || {});
      if (!showErrors(form, validate(artifact.schema || {}, values))) return;
      form.querySelector("button[type=submit]").disabled = true;
      say(progress, "Creating the agent…");
      var created = null, keys = null, secret = null;
      CA.call(plan.main, { body: values }).then(function (res) {
        if (!res.ok || !res.body) throw new Error(apiError(res));
        created = res.body;
        say(progress, "Making its keys in this browser…");
        return K.generate();
      }).then(function (made) {
        keys = made;
        if (!plan.after) return null;
        var body = { public_key: keys.x25519.publicKey, signing_public_key: keys.ed25519.publicKey };
        if (created.connection_mode === "webhook") { secret = K.webhookSecret(); body.webhook_secret = secret; }
        say(progress, "Registering its public keys with its own token…");
        return CA.call(plan.after, { params: CA.paramsFrom(plan.after, created), agentToken: created.agent_token, body: body }).then(function (res) {
          if (!res.ok) throw new Error("the agent was created but its keys were not registered: " + apiError(res));
          return res.body;
        });
      }).then(function () {
        form.remove();
        say(progress, "✓ Created and keys registered.");
        var rows = [secretRow("agent_id (public)", "agent_id", created.agent_id), secretRow("agent_token", "agent_token", created.agent_token),
          secretRow("X25519 private key (JWK)", "x25519_private_jwk", JSON.stringify(keys.x25519.privateJwk)),
          secretRow("Ed25519 private key (JWK)", "ed25519_private_jwk", JSON.stringify(keys.ed25519.privateJwk))];
        if (secret) rows.push(secretRow("webhook secret", "webhook_secret", secret));
        // Everything an SDK needs in one file (docs/guides/identity-and-sdks.md, "The agent SDKs"): save it as agent.json, mode 0600.
        var agentJson = { base_url: location.origin, agent_id: created.agent_id, agent_token: created.agent_token,
          x25519_private_jwk: keys.x25519.privateJwk, ed25519_private_jwk: keys.ed25519.privateJwk };
        if (secret) agentJson.webhook_secret = secret;
        rows.push(secretRow("agent.json (for sdk/python and sdk/typescript)", "agent_json", JSON.stringify(agentJson, null, 2)));
        var entry = { agent_id: created.agent_id, display_name: created.display_name, connection_mode: created.connection_mode,
          x25519: keys.x25519, ed25519: keys.ed25519 };
        if (secret) entry.webhook_secret = secret;
        node.appendChild(secretsCard("Secrets of " + created.display_name, rows, entry));
        if (plan.reply) return sendReply(plan, [{ agent_id: created.agent_id, display_name: created.display_name }], ctx);
      }).catch(function (err) {
        say(progress, "");
        say(error, err instanceof CA.Refusal ? "Refused by this client: " + err.reason : String(err.message || err));
        form.querySelector("button[type=submit]").disabled = false;
      });
    });
    return node;
  }

  function updateForm(artifact, plan, ctx) {
    var schema = artifact.schema || {};
    var initial = artifact.values || {};
    var form = schemaForm(schema, initial, "Save");
    var error = errorLine();
    var node = card(artifact.subtype, artifact.title || "Change the agent", [form, error]);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      say(error, "");
      var values = valuesOf(form, schema);
      var changed = {};
      Object.keys(schema).forEach(function (name) { if ((values[name] || "") !== (initial[name] || "")) changed[name] = values[name] || ""; });
      var check = {};
      Object.keys(changed).forEach(function (n) { if (changed[n] !== "") check[n] = changed[n]; });
      var merged = Object.assign({}, initial, check);
      if (!showErrors(form, validate(schema, merged))) return;
      CA.call(plan.main, { params: plan.main.params, body: changed }).then(function (res) {
        if (!res.ok || !res.body) throw new Error(apiError(res));
        form.replaceWith(el("p", { class: "muted small", text: "✓ Saved." }));
        return sendReply(plan, [{ agent_id: res.body.agent_id, display_name: res.body.display_name }], ctx);
      }).catch(function (err) { say(error, String(err.message || err)); });
    });
    return node;
  }

  function deletionConfirm(artifact, plan, ctx) {
    var preview = artifact.cascade_preview || {};
    var agent = artifact.agent || {};
    var error = errorLine();
    var button = el("button", { type: "button", class: "danger", text: "Delete " + (agent.display_name || "") });
    var node = card(artifact.subtype, artifact.title || "Delete the agent?", [
      el("p", { class: "cascade-preview", text: "Deleting ends " + A.plural(preview.affected_h2a_count, "relation") + " with " + A.plural(preview.affected_users_count, "user") +
        "; each gets a security alert. Its token and keys are revoked; past messages stay encrypted." }),
      el("div", { class: "actions" }, [button]), error
    ]);
    button.addEventListener("click", function () {
      button.disabled = true;
      CA.call(plan.main, { params: plan.main.params }).then(function (res) {
        if (!res.ok) throw new Error(apiError(res));
        button.replaceWith(el("p", { class: "muted small", text: "✓ Deleted." }));
        return sendReply(plan, [agent], ctx);
      }).catch(function (err) { button.disabled = false; say(error, String(err.message || err)); });
    });
    return node;
  }

  function rotateConfirm(artifact, plan, ctx) {
    var agent = artifact.agent || {};
    var emergency = el("input", { type: "checkbox", name: "emergency" });
    var error = errorLine();
    var button = el("button", { type: "button", class: "danger-outline", text: "Rotate the token" });
    var days = Math.round((artifact.grace_seconds || 0) / 86400);
    var node = card(artifact.subtype, artifact.title || "Rotate the token?", [
      el("p", { class: "small", text: "Normal: the old token and keys stay valid " + A.plural(days, "day") + ". Emergency: revoked now." }),
      el("label", { class: "small" }, [emergency, " emergency (revoke the old token now)"]),
      el("div", { class: "actions" }, [button]), error
    ]);
    button.addEventListener("click", function () {
      button.disabled = true;
      var urgent = emergency.checked;
      CA.call(plan.main, { params: plan.main.params, body: { emergency: urgent } }).then(function (res) {
        if (!res.ok || !res.body) throw new Error(apiError(res));
        button.remove();
        node.appendChild(secretsCard("New token of " + (agent.display_name || res.body.agent_id), [secretRow("agent_token", "agent_token", res.body.agent_token)], null));
        return sendReply(plan, [{ agent_id: res.body.agent_id, display_name: agent.display_name, emergency: urgent }], ctx);
      }).catch(function (err) { button.disabled = false; say(error, String(err.message || err)); });
    });
    return node;
  }

  function listDisplay(artifact, plan, ctx) {
    var rows = (artifact.agents || []).map(function (a) {
      function act(command) {
        var b = el("button", { type: "button", class: "small link", text: command.slice(1).split("-")[0] });
        // The custom id: the one id the identity pages show, and one a command resolves (issue 57).
        b.addEventListener("click", function () { ctx.send(command + " " + (a.custom_id || a.agent_id)); });
        return b;
      }
      return el("tr", { "data-agent": a.agent_id }, [el("td", { text: a.display_name }), el("td", {}, [el("code", { class: "small", text: a.custom_id })]),
        el("td", { text: a.connection_mode }),
        el("td", { text: a.keys_registered ? "✓" : "—" }), el("td", {}, [act("/update-agent"), act("/rotate-token"), act("/delete-agent")])]);
    });
    return card(artifact.subtype, artifact.title || "Your agents", rows.length ? [el("table", { class: "table small" }, [
      el("thead", {}, [el("tr", {}, ["Name", "Custom id", "Connection", "Keys", ""].map(function (h) { return el("th", { text: h }); }))]),
      el("tbody", {}, rows)])] : [el("p", { class: "muted small", text: "No agents yet." })]);
  }

  var RENDER = {};
  RENDER[ST.agent_creation_form] = creationForm;
  RENDER[ST.agent_update_form] = updateForm;
  RENDER[ST.agent_deletion_confirm] = deletionConfirm;
  RENDER[ST.agent_token_rotate_confirm] = rotateConfirm;
  RENDER[ST.agent_list_display] = listDisplay;

  /* The element for artifact `message`, or a "refused" note when the executor refused it. */
  function render(message, ctx) {
    var result = CA.inspect(message, { conversationId: ctx.conversationId() });
    if (!result.ok) return refused(result);
    var draw = RENDER[result.plan.subtype];
    if (!draw) return refused({ refusal: new CA.Refusal("unknown", "no renderer for " + result.plan.subtype) });
    if (result.plan.main && !result.plan.reply) return refused({ refusal: new CA.Refusal("unknown", "a form must say what to report back") });
    return draw(message.artifact, result.plan, ctx);
  }

  /* A card for an artifact_response a client sent (a user turn whose text is one), else null. */
  function responseCard(content) {
    if (typeof content !== "string" || content.charAt(0) !== "{") return null;
    var parsed;
    try { parsed = JSON.parse(content); } catch (e) { return null; }
    if (!parsed || parsed.msg_subtype !== CA.RESPONSE || !parsed.artifact) return null;
    var payload = parsed.artifact.payload || {};
    // Words first (the agent's name); the fields as sent behind "Show the data" (its internal id
    // among them: the chat names agents by display name and custom id only, issue 57).
    return el("div", { class: "artifact-card response", "data-artifact": parsed.artifact.subtype || "" }, [
      el("div", { class: "artifact-title", text: "Reported: " + (parsed.artifact.subtype || "") }),
      payload.display_name ? el("div", { class: "small", text: String(payload.display_name) + (payload.emergency === true ? " (emergency)" : "") }) : null,
      window.Agents.dataDetails(payload)
    ]);
  }

  window.Artifacts = { render: render, responseCard: responseCard, validate: validate };
})();
