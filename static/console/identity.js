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
      row.querySelector('[data-action="delete"]').addEventListener("click", function () {
        A.api("GET", path + "/deletion-preview").then(function (res) {
          if (!res.ok) return fail(res);
          var p = res.body;
          var question = "Delete " + name + "? " + p.affected_h2a_count + " relation(s) with " + p.affected_users_count +
            " user(s) will end and each user gets a security alert. Its token and keys are revoked; stored envelopes are kept.";
          if (!window.confirm(question)) return;
          A.api("DELETE", path).then(function (del) {
            if (!del.ok) return fail(del);
            row.remove();
          });
        });
      });
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
    li.appendChild(A.el("time", { class: "muted small", text: A.fmtTime(item.created_at) }));
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
