/* Identity pages: create, edit, rotate, delete (with the cascade preview) identity agents,
   replay deliveries, and the live inbox. Every write goes to /v1/identity/ with the session
   cookie and CSRF token (Agents.api); errors are the API's own sentences. */
(function () {
  "use strict";
  var A = window.Agents;

  function fail(res) {
    var box = document.getElementById("identity-error");
    if (box) A.showError(box, res);
  }

  function failText(message) {
    var box = document.getElementById("identity-error");
    if (!box) return;
    box.textContent = message;
    box.hidden = false;
  }

  function showToken(title, token) {
    var box = document.getElementById("token-box");
    document.getElementById("token-title").textContent = title;
    document.getElementById("new-token").textContent = token;
    box.hidden = false;
    box.scrollIntoView();
  }

  function formBody(form, keepBlank) {
    var body = {};
    new FormData(form).forEach(function (value, key) {
      if (value !== "" || keepBlank) body[key] = value;
    });
    return body;
  }

  function colourBadges(root) {
    root.querySelectorAll(".badge[data-status]").forEach(function (b) {
      b.style.setProperty("--badge", (A.vocab.badge || {})[b.getAttribute("data-status")] || "#6b7280");
    });
  }

  function wireAgents() {
    var create = document.getElementById("identity-create");
    if (create) {
      create.addEventListener("submit", function (e) {
        e.preventDefault();
        A.api("POST", "/v1/identity/agents", formBody(create, false)).then(function (res) {
          if (!res.ok) return fail(res);
          create.reset();
          showToken("Token of " + res.body.display_name + " (" + res.body.custom_id + ")", res.body.agent_token);
        });
      });
    }
    document.querySelectorAll("#identity-table tr[data-agent]").forEach(function (row) {
      var id = row.getAttribute("data-agent");
      var name = row.getAttribute("data-display-name");
      var path = "/v1/identity/agents/" + encodeURIComponent(id);
      var edit = row.querySelector("[data-edit-form]");
      row.querySelector('[data-action="edit"]').addEventListener("click", function () { edit.hidden = !edit.hidden; });
      edit.addEventListener("submit", function (e) {
        e.preventDefault();
        A.api("PATCH", path, formBody(edit, true)).then(function (res) {
          if (!res.ok) return fail(res);
          window.location.reload();
        });
      });
      row.querySelector('[data-action="rotate"]').addEventListener("click", function () {
        var emergency = row.querySelector("[data-emergency]").checked;
        var question = emergency
          ? "Emergency rotation: the current token and keys of " + name + " stop working NOW, live connections are closed. Continue?"
          : "Rotate the token of " + name + "? The current token and keys keep working for 7 days.";
        if (!window.confirm(question)) return;
        A.api("POST", path + "/token/regenerate", { emergency: emergency }).then(function (res) {
          if (!res.ok) return fail(res);
          showToken("New token of " + name + (emergency ? " (emergency: the old one is revoked)" : ""), res.body.agent_token);
        });
      });
      var rekey = row.querySelector('[data-action="rekey"]');
      if (rekey) rekey.addEventListener("click", function () { reRegisterKeys(rekey, name); });
      row.querySelector('[data-action="delete"]').addEventListener("click", function () {
        A.api("GET", path + "/deletion-preview").then(function (res) {
          if (!res.ok) return fail(res);
          var p = res.body;
          var question = "Delete " + name + "? " + A.plural(p.affected_h2a_count, "relation") + " with " + A.plural(p.affected_users_count, "user") +
            " will end and each user gets a security alert. Its token and keys are revoked; stored envelopes are kept.";
          if (!window.confirm(question)) return;
          A.api("DELETE", path).then(function (del) {
            if (!del.ok) return fail(del);
            row.remove();
          });
        });
      });
    });
  }

  /* "Re-register keys": make new X25519 and Ed25519 key pairs (and a webhook secret for a
     webhook agent) in this browser, register their public halves for the agent (the console's
     creator-only route, the API's keys_register behind it), and show the private halves once. */
  function reRegisterKeys(button, name) {
    var question = "Make new keys for " + name + " in this browser and register them? Its current keys stop working at once; " +
      "the agent's host needs the new private keys, shown next.";
    if (!window.confirm(question)) return;
    if (!window.AgentKeys) return failText("This page could not load its key maker; reload it and try again.");
    button.disabled = true;
    var keys = null, secret = null;
    window.AgentKeys.generate().then(function (made) {
      keys = made;
      var body = { public_key: keys.x25519.publicKey, signing_public_key: keys.ed25519.publicKey };
      if (button.hasAttribute("data-webhook")) { secret = window.AgentKeys.webhookSecret(); body.webhook_secret = secret; }
      return A.api("POST", button.getAttribute("data-rekey-url"), body);
    }).then(function (res) {
      button.disabled = false;
      if (!res.ok) return fail(res);
      document.getElementById("keys-title").textContent = "New keys of " + name;
      document.getElementById("new-x25519").textContent = JSON.stringify(keys.x25519.privateJwk);
      document.getElementById("new-ed25519").textContent = JSON.stringify(keys.ed25519.privateJwk);
      document.getElementById("new-webhook-secret").textContent = secret || "";
      document.getElementById("new-webhook-secret-row").hidden = !secret;
      var box = document.getElementById("keys-box");
      box.hidden = false;
      box.scrollIntoView();
    }, function (err) {
      button.disabled = false;
      failText("This browser could not make the keys (" + (err && err.message || err) + "); no key was changed.");
    });
  }

  function wireDeliveries() {
    document.querySelectorAll("#deliveries-table tr[data-delivery]").forEach(function (row) {
      var button = row.querySelector('[data-action="replay"]');
      if (!button) return;
      button.addEventListener("click", function () {
        A.api("POST", "/v1/identity/deliveries/" + encodeURIComponent(row.getAttribute("data-delivery")) + "/replay").then(function (res) {
          if (!res.ok) return fail(res);
          window.location.reload();
        });
      });
    });
  }

  function inboxItem(item) {
    var li = A.el("li", { class: "inbox-item fresh " + item.kind + (item.system ? " alert-item" : ""), "data-id": item.id, "data-kind": item.kind });
    if (item.system) {
      var d = item.system.data || {};
      li.appendChild(A.badge(item.system.type));
      var what = item.system.code === "agent.keys_revoked"
        ? "'s token and keys were revoked by an emergency rotation; replies signed with the old key are refused."
        : " was deleted by its creator; your relation with it ended.";
      li.appendChild(A.el("span", { class: "body" }, [A.el("strong", { text: item.system.code }),
        ": " + (d.display_name || "") + " (" + (d.custom_id || "") + ")" + what]));
    } else {
      li.appendChild(A.el("span", { class: "chip", text: "envelope" }));
      li.appendChild(A.el("span", { class: "body" }, ["from ", A.el("code", { text: item.agent_id }), " · " + (item.envelope ? item.envelope.size_bytes : 0) + " bytes sealed · ",
        A.el("a", { href: "/console/identity/talk/" + encodeURIComponent(item.agent_id) + "/", text: "open the conversation" })]));
    }
    li.appendChild(A.timeEl(item.created_at, { class: "muted small" }));
    return li;
  }

  function wireInbox() {
    var list = document.getElementById("inbox");
    if (!list || !window.EventSource) return;
    var source = new EventSource(list.getAttribute("data-stream"));
    source.addEventListener(A.vocab.enums.InboxStreamFrame.INBOX, function (e) {
      var item = JSON.parse(e.data);
      if (list.querySelector('[data-id="' + item.id + '"]')) return;
      var empty = document.getElementById("inbox-empty");
      if (empty) empty.remove();
      list.insertBefore(inboxItem(item), list.firstChild);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    colourBadges(document);
    wireAgents();
    wireDeliveries();
    wireInbox();
  });
})();
