/* The client_action executor (spec 001 "client_action 安全模型"): the ONE place where the console
   acts on an artifact form from the system agent. Exposed as window.ClientAction.

   Rules, enforced here and nowhere weaker:
   - Endpoints: the canonical allow-list below, kept by the client. A form's own
     `allowed_endpoints` is never trusted. An endpoint off the list is ignored (the form is not
     shown) and reported as an anomaly (POST /v1/identity/anomalies).
   - `auth`: only the vocabulary's client auths (the user's own credential, or the new agent's
     token from the previous step); anything else refuses the form.
   - Path parameters: `params` values must be ids (letters, digits, _ and -, ≤ 64); a
     `params_from_response` value must be `$.field` (a top-level field, nothing else).
   - The reply (`post_success_artifact`): only its `allowed_fields`, and never a forbidden field
     (the client's own list, the form's list, or any name that reads as a token, secret or
     private key) — a form asking for one is refused. A field name must be [a-z0-9_]{1,64};
     whether it is forbidden is decided on its folded form (NFKC, then Unicode's look-alikes of
     [a-z0-9_] replaced — the table the page carries as #agents-field-fold, from
     guide/field_names.py — then lower case), so `agent_tokеn` with a Cyrillic е reads as
     agent_token. The server applies the same rule to an artifact_response.
   Every refusal is reported as an anomaly with names only, never a value. */
(function () {
  "use strict";
  var A = window.Agents;
  var vocab = A.vocab;

  // The canonical allow-list: the identity routes a form may make the client call.
  var ENDPOINTS = Object.freeze([
    "POST /v1/identity/agents",
    "POST /v1/identity/agents/:id/keys/register",
    "PATCH /v1/identity/agents/:id",
    "DELETE /v1/identity/agents/:id",
    "POST /v1/identity/agents/:id/token/regenerate"
  ]);
  // Never sent back to the system agent, whatever a form says.
  var FORBIDDEN = Object.freeze(["agent_token", "token", "private_key", "private_keys", "x25519_private_key", "ed25519_private_key",
    "signing_private_key", "webhook_secret", "secret", "jwk", "d"]);
  var SECRET_NAME = /token|secret|private|password|jwk/;
  var FIELD_NAME = /^[a-z0-9_]{1,64}$/;
  var FOLD = (function () {
    var node = document.getElementById("agents-field-fold");
    try { return node ? JSON.parse(node.textContent) : {}; } catch (e) { return {}; }
  })();
  var SECRET_VALUE = /\bagt_[a-z0-9-]+_[0-9a-f]{16}_[0-9a-f]{48}\b|\bwhsec_/;
  var ID_VALUE = /^[A-Za-z0-9_-]{1,64}$/;
  var PARAM_NAME = /^:[a-z_]{1,32}$/;
  var JSONPATH = /^\$\.([A-Za-z_][A-Za-z0-9_]{0,63})$/;

  function word(list, value) {
    if ((vocab[list] || []).indexOf(value) < 0) throw new Error("not in the vocabulary's " + list + ": " + value);
    return value;
  }
  var AUTH_USER = word("clientAuth", "user_jwt"), AUTH_AGENT = word("clientAuth", "agent_token");
  var KIND = {
    endpoint: word("anomalyKind", "endpoint_not_allowed"), auth: word("anomalyKind", "auth_refused"),
    jsonpath: word("anomalyKind", "jsonpath_refused"), field: word("anomalyKind", "field_refused"), param: word("anomalyKind", "param_refused")
  };
  var FORM = word("msgSubtype", "artifact_form"), RESPONSE = word("msgSubtype", "artifact_response");

  function Refusal(kind, reason, info) { this.kind = kind; this.reason = reason; this.info = info || {}; }

  function text(value, max) { return typeof value === "string" ? value.slice(0, max || 300) : ""; }

  /* Tell the platform what was refused (names only). Resolves the API answer; never throws. */
  function reportAnomaly(refusal, context) {
    var info = refusal.info || {};
    var detail = { reason: text(refusal.reason) };
    if (info.field) detail.field = text(info.field, 64);
    if (info.where) detail.where = text(info.where, 64);
    if (info.folded && info.folded !== info.field) detail.folded = text(info.folded, 64);
    if (info.value !== undefined) detail.value = text(String(info.value), 120);
    return A.api("POST", "/v1/identity/anomalies", {
      kind: refusal.kind, artifact_subtype: text(context && context.subtype, 64), endpoint: text(info.endpoint, 300),
      conversation_id: text(context && context.conversationId, 64), detail: detail
    });
  }

  function checkEndpoint(endpoint, where) {
    if (typeof endpoint !== "string" || ENDPOINTS.indexOf(endpoint) < 0) {
      throw new Refusal(KIND.endpoint, "endpoint not on the client's allow-list", { endpoint: typeof endpoint === "string" ? endpoint : "", where: where });
    }
    return endpoint;
  }

  function checkAuth(auth, where, endpoint) {
    if (auth !== AUTH_USER && auth !== AUTH_AGENT) throw new Refusal(KIND.auth, "auth must be user_jwt or agent_token", { where: where, value: String(auth), endpoint: endpoint });
    return auth;
  }

  function checkParams(params, where, endpoint) {
    var out = {};
    Object.keys(params || {}).forEach(function (name) {
      var value = params[name];
      if (!PARAM_NAME.test(name) || typeof value !== "string" || !ID_VALUE.test(value)) {
        throw new Refusal(KIND.param, "a path parameter must be an id", { where: where, field: name, endpoint: endpoint });
      }
      out[name] = value;
    });
    return out;
  }

  function checkPaths(spec, where, endpoint) {
    var out = {};
    if (spec == null) return out;
    if (typeof spec !== "object" || Array.isArray(spec)) throw new Refusal(KIND.jsonpath, "params_from_response must be an object", { where: where, endpoint: endpoint });
    Object.keys(spec).forEach(function (name) {
      var path = spec[name];
      var match = typeof path === "string" ? JSONPATH.exec(path) : null;
      if (!PARAM_NAME.test(name)) throw new Refusal(KIND.param, "a path parameter must be :name", { where: where, field: name, endpoint: endpoint });
      if (!match) throw new Refusal(KIND.jsonpath, "params_from_response must be $.field (top level)", { where: where, field: name, value: String(path), endpoint: endpoint });
      out[name] = match[1];
    });
    return out;
  }

  /* A name as it reads: NFKC, look-alikes of [a-z0-9_] replaced, lower case ("agent_tokеn" → "agent_token"). */
  function fold(name) {
    var out = "";
    Array.from(String(name).normalize("NFKC")).forEach(function (c) {
      out += Object.prototype.hasOwnProperty.call(FOLD, c) ? FOLD[c] : c;
    });
    return out.toLowerCase();
  }

  function forbidden(name, formForbidden) {
    var folded = fold(name);
    return FORBIDDEN.indexOf(folded) >= 0 || (formForbidden || []).map(fold).indexOf(folded) >= 0 || SECRET_NAME.test(folded);
  }

  /* Why a reply field name is refused (forbidden after folding, or outside [a-z0-9_]{1,64}), or "" when it may be used. */
  function nameRefusal(name, formForbidden) {
    if (typeof name !== "string") return "a field name must be a string";
    if (forbidden(name, formForbidden)) return "the reply asks for a forbidden field";
    if (!FIELD_NAME.test(name)) return "a field name must match [a-z0-9_]{1,64}";
    return "";
  }

  function checkReply(spec) {
    if (spec == null) return null;
    if (typeof spec !== "object" || spec.msg_subtype !== RESPONSE || (vocab.artifactSubtype || []).indexOf(spec.subtype) < 0) {
      throw new Refusal(KIND.field, "post_success_artifact must name an artifact_response subtype", { where: "post_success_artifact" });
    }
    var allowed = Array.isArray(spec.allowed_fields) ? spec.allowed_fields : [];
    var formForbidden = Array.isArray(spec.forbidden_fields) ? spec.forbidden_fields : [];
    allowed.forEach(function (name) {
      var why = nameRefusal(name, formForbidden);
      if (why) throw new Refusal(KIND.field, why, { where: "post_success_artifact.allowed_fields", field: String(name), folded: fold(name) });
    });
    return { subtype: spec.subtype, allowed: allowed.slice(), forbidden: formForbidden.slice() };
  }

  /* Check an artifact message before anything is shown or called.
     Out: {ok: true, plan} — plan {subtype, main: {endpoint, auth, params} | null, after: {endpoint,
     auth, fromResponse: {":id": "agent_id"}} | null, reply: {subtype, allowed, forbidden} | null} —
     or {ok: false, refusal} after reporting the anomaly (context: {conversationId}). */
  function inspect(message, context) {
    var artifact = message && message.artifact;
    var subtype = artifact && artifact.subtype;
    var ctx = { subtype: typeof subtype === "string" ? subtype : "", conversationId: context && context.conversationId };
    try {
      if (!message || message.msg_subtype !== FORM || !artifact || (vocab.artifactSubtype || []).indexOf(subtype) < 0) {
        throw new Refusal(KIND.field, "not an artifact form this client knows", { where: "artifact.subtype", value: String(subtype) });
      }
      var plan = { subtype: subtype, main: null, after: null, reply: null };
      var action = artifact.client_action;
      if (action != null) {
        var endpoint = checkEndpoint(action.endpoint, "client_action.endpoint");
        plan.main = { endpoint: endpoint, auth: checkAuth(action.auth, "client_action.auth", endpoint), params: checkParams(action.params, "client_action.params", endpoint) };
        var next = action.after_success;
        if (next != null) {
          var afterEndpoint = checkEndpoint(next.endpoint, "client_action.after_success.endpoint");
          plan.after = { endpoint: afterEndpoint, auth: checkAuth(next.auth, "client_action.after_success.auth", afterEndpoint),
            fromResponse: checkPaths(next.params_from_response, "client_action.after_success.params_from_response", afterEndpoint) };
        }
        plan.reply = checkReply(artifact.post_success_artifact);
      }
      return { ok: true, plan: plan };
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      reportAnomaly(err, ctx);
      return { ok: false, refusal: err };
    }
  }

  /* The :params of an after_success step taken from the previous response: top-level fields only, ids only. */
  function paramsFrom(after, response) {
    var params = {};
    Object.keys(after.fromResponse || {}).forEach(function (name) {
      var value = response && Object.prototype.hasOwnProperty.call(response, after.fromResponse[name]) ? response[after.fromResponse[name]] : undefined;
      if (typeof value !== "string" || !ID_VALUE.test(value)) throw new Refusal(KIND.param, "the response's field is not an id", { field: name, endpoint: after.endpoint });
      params[name] = value;
    });
    return params;
  }

  /* Call one allowed step: {endpoint, auth} with its :params, JSON `body`, and for agent_token the
     token (never sent with the user's cookie). Resolves {ok, status, body}. Throws a Refusal for
     anything the rules refuse (checked again here: this is the only way to call). */
  function call(step, options) {
    var endpoint = checkEndpoint(step.endpoint, "call");
    var auth = checkAuth(step.auth, "call", endpoint);
    var params = checkParams(options.params || {}, "call", endpoint);
    var space = endpoint.indexOf(" ");
    var method = endpoint.slice(0, space);
    var path = endpoint.slice(space + 1).replace(/:[a-z_]+/g, function (name) {
      if (!params[name]) throw new Refusal(KIND.param, "a path parameter is missing", { field: name, endpoint: endpoint });
      return encodeURIComponent(params[name]);
    });
    var headers = { Accept: "application/json" };
    var init = { method: method, headers: headers };
    if (auth === AUTH_USER) {
      init.credentials = "same-origin";
      headers["X-CSRFToken"] = A.csrfToken();
    } else {
      if (typeof options.agentToken !== "string" || !options.agentToken) throw new Refusal(KIND.auth, "no agent token for this step", { endpoint: endpoint });
      init.credentials = "omit";
      headers.Authorization = "Bearer " + options.agentToken;
    }
    if (method !== "GET" && method !== "DELETE") {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body || {});
    }
    return fetch(path, init).then(function (res) {
      return res.text().then(function (t) {
        var parsed = null;
        try { parsed = t ? JSON.parse(t) : null; } catch (e) { parsed = null; }
        return { ok: res.ok, status: res.status, body: parsed, text: t };
      });
    }, function (err) { return { ok: false, status: 0, body: null, text: String(err) }; });
  }

  /* The artifact_response message to send back: only the plan's allowed fields, taken from
     `sources` (objects, first wins), never a forbidden one, never a value that is a credential. */
  function reply(plan, sources) {
    var payload = {};
    plan.reply.allowed.forEach(function (name) {
      if (nameRefusal(name, plan.reply.forbidden)) return;
      for (var i = 0; i < sources.length; i++) {
        var source = sources[i] || {};
        if (Object.prototype.hasOwnProperty.call(source, name)) {
          var value = source[name];
          if (typeof value === "boolean" || (typeof value === "string" && value && !SECRET_VALUE.test(value))) payload[name] = value;
          return;
        }
      }
    });
    return { msg_subtype: RESPONSE, artifact: { subtype: plan.reply.subtype, payload: payload } };
  }

  window.ClientAction = { ENDPOINTS: ENDPOINTS, FORBIDDEN: FORBIDDEN, Refusal: Refusal, inspect: inspect, call: call, paramsFrom: paramsFrom, fold: fold,
    reply: reply, reportAnomaly: reportAnomaly, AUTH_USER: AUTH_USER, AUTH_AGENT: AUTH_AGENT, FORM: FORM, RESPONSE: RESPONSE };
})();
