/* Approval requests: the org-wide Approvals page, the card on a session page and the notice in
   the chat (issues 28 and 57).

   Reads GET /v1/agents/approvals (?session= for one session), pending first, and answers with
   POST /v1/agents/sessions/{id}/approve {toolCallId, arguments?} or …/deny {toolCallId, message?}
   — the API's own answers and errors are shown, nothing is decided here. Approve/Deny are offered
   only where the page's answer rule allows (`Agents.mayAnswer`: the server's rule, in the page);
   anyone else sees the request waiting, without buttons. An answered request shows its outcome
   (approved, edited, denied, timed out, stopped) from the vocabulary.

   `AgentsApprovals.mount(box, {session, onChange})` draws the requests of `session` into `box`
   (an element holding a `.approval-list`) and returns `{refresh}`; the page's own
   `[data-approvals]` box is mounted at load, and the session page calls
   `AgentsApprovals.refresh()` on each turn streamed in, so a request appears and goes live. */
(function () {
  "use strict";
  var A = window.Agents;
  var word = A.vocab.word || {};

  function mount(box, options) {
    options = options || {};
    var session = options.session || box.dataset.session || "";
    var list = box.querySelector(".approval-list");
    var card = box.closest("[data-approvals-card]") || box;
    var busy = false, again = false;
    var said = {}; // toolCallId → what this page's answer was told (kept across re-renders)

    function url() { return "/v1/agents/approvals" + (session ? "?session=" + encodeURIComponent(session) : ""); }

    function answer(item, verb, row) {
      var body = { toolCallId: item.toolCallId };
      var result = row.querySelector(".approval-result");
      if (verb === "approve") {
        var edited = row.querySelector("textarea.approval-args").value.trim();
        if (edited !== JSON.stringify(item.arguments, null, 2)) {
          try { body.arguments = JSON.parse(edited); } catch (e) { result.textContent = "The arguments are not valid JSON."; return; }
        }
      } else {
        var reason = row.querySelector("input.approval-message").value.trim();
        if (reason) body.message = reason;
      }
      row.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      result.textContent = (verb === "approve" ? "Approving" : "Denying") + "…";
      A.api("POST", "/v1/agents/sessions/" + encodeURIComponent(item.sessionId) + "/" + verb, body).then(function (res) {
        if (res.ok && res.body) {
          var outcome = res.body.approval.outcome || res.body.approval.state;
          said[item.toolCallId] = { state: res.body.approval.state,
            text: outcome + (res.body.forwarded ? " — the run resumes" : " — the run waits for its other requests") };
          refresh();
          if (options.onChange) options.onChange(res.body);
          return;
        }
        row.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
        result.textContent = "";
        var alert = A.el("div", { class: "alert error", role: "alert" });
        result.appendChild(alert);
        A.showError(alert, res);
      });
    }

    function render(items) {
      list.innerHTML = "";
      var pending = items.filter(function (i) { return i.state === word.pending; });
      card.hidden = session ? pending.length === 0 && items.length === 0 : false;
      box.dataset.pending = String(pending.length);
      if (!items.length) { list.appendChild(A.el("li", { class: "muted", text: "No approval requests." })); return; }
      items.forEach(function (item) {
        var open = item.state === word.pending;
        var mine = open && A.mayAnswer(item.startedBy);
        var row = A.el("li", { class: "approval", "data-tool-call": item.toolCallId, "data-state": item.state, "data-outcome": item.outcome || "" });
        var head = A.el("div", { class: "approval-head" });
        head.appendChild(A.el("code", { text: item.tool }));
        head.appendChild(document.createTextNode(" "));
        head.appendChild(A.badge(item.outcome || item.state));
        if (!session) {
          head.appendChild(document.createTextNode(" run "));
          head.appendChild(A.el("a", { href: "/console/sessions/" + encodeURIComponent(item.sessionId) + "/", text: item.runId }));
        }
        if (item.answeredBy) head.appendChild(A.el("span", { class: "muted small", text: " by " + item.answeredBy + (item.message ? ": " + item.message : "") }));
        row.appendChild(head);
        if (mine) {
          var args = A.el("textarea", { class: "approval-args", rows: "3", "aria-label": "Arguments (edit before approving)" });
          args.value = JSON.stringify(item.arguments, null, 2);
          row.appendChild(args);
          var controls = A.el("div", { class: "controls" });
          var approve = A.el("button", { type: "button", class: "primary", "data-approve": item.toolCallId, text: "Approve" });
          var reason = A.el("input", { class: "approval-message", placeholder: "Why not (the agent reads it)", "aria-label": "Why not (the agent reads it)", maxlength: "16384" });
          var deny = A.el("button", { type: "button", class: "danger-outline", "data-deny": item.toolCallId, text: "Deny" });
          approve.addEventListener("click", function () { answer(item, "approve", row); });
          deny.addEventListener("click", function () { answer(item, "deny", row); });
          [approve, reason, deny].forEach(function (n) { controls.appendChild(n); });
          row.appendChild(controls);
        } else {
          row.appendChild(A.dataDetails(item.arguments));  // the arguments are data: behind "Show the data"
          if (open) {
            row.appendChild(A.el("p", { class: "muted small waiting-for", text: "Waiting for " + (item.startedBy || "the user who started the run") +
              " or an org admin to answer." }));
          }
        }
        var result = A.el("div", { class: "approval-result small", "aria-live": "polite" });
        if (said[item.toolCallId]) result.appendChild(A.el("span", { class: "control-ok", "data-answer": said[item.toolCallId].state, text: said[item.toolCallId].text }));
        row.appendChild(result);
        list.appendChild(row);
      });
    }

    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      A.api("GET", url()).then(function (res) {
        busy = false;
        if (res.ok && res.body) render(res.body.approvals || []);
        if (again) { again = false; refresh(); }
      });
    }

    refresh();
    return { refresh: refresh };
  }

  var page = document.querySelector("[data-approvals]");
  var mounted = page ? mount(page) : null;
  window.AgentsApprovals = { mount: mount, refresh: function () { if (mounted) mounted.refresh(); } };
})();
