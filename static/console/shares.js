/* Share links of a conversation or a session (issue 57): create one (its address shown once, to
   copy), list them with their state, revoke one — POST/GET /v1/agents/chat/conversations/{id}/shares
   or /v1/agents/sessions/{id}/shares, DELETE /v1/agents/chat/shared/{shareId}. The API decides who
   may share (the user who started it and the org's admins); anyone else is told so in words.

   `AgentsShares.mount(box, subject)` draws into `box` (holding `.share-days`, `.share-make`,
   `.share-new`, `.share-list`, `.share-note`); `subject()` returns `{kind, id, startedBy}` (a
   ShareSubject word, the id, the actor who started it) or null; returns `{refresh}`. Whoever the
   page's share rule (`Agents.mayShare`) leaves out is told who may share, and nothing is asked of
   the API. A `[data-shares]` box is mounted at load with its `data-subject`, `data-subject-id`
   and `data-started-by`. */
(function () {
  "use strict";
  var A = window.Agents;
  var SUBJECT = A.vocab.enums.ShareSubject || {};

  function base(subject) {
    return subject.kind === SUBJECT.CONVERSATION ? "/v1/agents/chat/conversations/" + encodeURIComponent(subject.id) + "/shares"
      : "/v1/agents/sessions/" + encodeURIComponent(subject.id) + "/shares";
  }

  function mount(box, subject) {
    var list = box.querySelector(".share-list"), fresh = box.querySelector(".share-new"), note = box.querySelector(".share-note");
    var make = box.querySelector(".share-make"), days = box.querySelector(".share-days"), controls = box.querySelector(".share-create");

    function item(share) {
      var li = A.el("li", { class: "share", "data-share": share.id, "data-state": share.state }, [
        A.badge(share.state), " ",
        A.el("span", { class: "small", text: "until " }), A.timeEl(share.expiresAt, { class: "small" }),
        A.el("span", { class: "muted small", text: " · by " + share.createdBy })
      ]);
      if (share.state === SHARE_ACTIVE()) {
        var revoke = A.el("button", { type: "button", class: "small danger-outline", "data-revoke": share.id, text: "Revoke" });
        revoke.addEventListener("click", function () {
          revoke.disabled = true;
          A.api("DELETE", "/v1/agents/chat/shared/" + encodeURIComponent(share.id)).then(function (res) {
            if (res.ok) { refresh(); return; }
            revoke.disabled = false;
            var alert = A.el("div", { class: "alert error", role: "alert" });
            li.appendChild(alert);
            A.showError(alert, res, "Not revoked: ");
          });
        });
        li.appendChild(document.createTextNode(" "));
        li.appendChild(revoke);
      }
      return li;
    }

    function SHARE_ACTIVE() { return (A.vocab.enums.ShareState || {}).ACTIVE; }

    var shownFor = null; // the subject whose new link is on show (another subject's never is)
    function refresh() {
      var s = subject();
      if (!s || s.id !== shownFor) { fresh.innerHTML = ""; shownFor = s ? s.id : null; }
      if (!s || !s.id) { list.innerHTML = ""; controls.hidden = true; note.textContent = "Start the conversation first; then it can be shared."; return Promise.resolve(); }
      if (!A.mayShare(s.startedBy)) {  // the server's rule, in the page: no request it would refuse
        list.innerHTML = "";
        controls.hidden = true;
        note.textContent = "Only the user who started it or an org admin may share it.";
        return Promise.resolve();
      }
      return A.api("GET", base(s)).then(function (res) {
        list.innerHTML = "";
        controls.hidden = false;
        note.textContent = "";
        if (!res.ok || !res.body) { list.appendChild(A.el("li", { class: "err", text: "Could not list the links: " + A.errorText(res) })); return; }
        (res.body.shares || []).forEach(function (share) { list.appendChild(item(share)); });
        if (!(res.body.shares || []).length) list.appendChild(A.el("li", { class: "muted small", text: "No links yet." }));
      });
    }

    make.addEventListener("click", function () {
      var s = subject();
      if (!s || !s.id) return;
      make.disabled = true;
      A.api("POST", base(s), { expiresInDays: Number(days.value) }).then(function (res) {
        make.disabled = false;
        fresh.innerHTML = "";
        if (!res.ok || !res.body) {
          var alert = A.el("div", { class: "alert error", role: "alert" });
          fresh.appendChild(alert);
          A.showError(alert, res, "No link was made: ");
          return;
        }
        var code = A.el("code", { class: "share-url", id: "share-url-" + res.body.id, text: res.body.url });
        var copy = A.el("button", { type: "button", class: "small", "data-copy": "#share-url-" + res.body.id, text: "Copy" });
        copy.addEventListener("click", function () {
          (navigator.clipboard ? navigator.clipboard.writeText(res.body.url) : Promise.reject()).then(
            function () { copy.textContent = "Copied"; }, function () { copy.textContent = "Select it and copy"; });
        });
        fresh.appendChild(A.el("div", { class: "alert success", role: "status" }, [
          A.el("p", { class: "small", text: "Anyone with this link can read the turns until it expires or you revoke it. It is shown this once:" }),
          A.el("p", { class: "copy-row" }, [code, copy])
        ]));
        shownFor = s.id;
        refresh();
      });
    });

    refresh();
    return { refresh: refresh };
  }

  document.querySelectorAll("[data-shares]").forEach(function (box) {
    mount(box, function () { return { kind: box.dataset.subject, id: box.dataset.subjectId, startedBy: box.dataset.startedBy || "" }; });
  });
  window.AgentsShares = { mount: mount };
})();
