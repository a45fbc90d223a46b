/* The sessions list: GET /v1/agents/sessions (roots, newest first), kept live by the org's
   SSE stream (`event: session` frames upsert rows). Statuses come from the vocabulary. */
(function () {
  "use strict";
  var A = window.Agents;
  var table = document.getElementById("sessions-table");
  if (!table) return;
  var body = table.querySelector("tbody");
  var empty = document.getElementById("sessions-empty");
  var errorBox = document.getElementById("sessions-error");
  var filter = document.getElementById("status-filter");
  var streamState = document.getElementById("stream-state");
  var base = window.location.pathname;

  (A.vocab.sessionStatus || []).forEach(function (s) { filter.appendChild(A.el("option", { value: s, text: s })); });

  // "message: It is 42." — the turn's kind and its words; the kind alone for a data-only turn.
  function latest(kind, text) { return text ? kind + ": " + text.replace(/\s+/g, " ") : kind; }

  function row(s) {
    var title = s.title || s.agent || s.id;
    var last = s.lastEvent ? latest(s.lastEvent.kind, A.previewText(s.lastEvent.preview)) : "";
    // A user's stop ends its session `error`: shown "stopped" (grey), never a red failure.
    return A.el("tr", { "data-session": s.id, "data-status": s.status }, [
      A.el("td", { "data-label": "Session" }, [A.el("div", {}, [A.el("a", { href: base + encodeURIComponent(s.id) + "/", text: title }),
        A.el("div", { class: "muted small", text: s.agent + " · " + s.id })])]),
      A.el("td", { "data-label": "Status" }, [A.badge(A.statusWord(s.status, s.finishReason))]),
      A.el("td", { class: "num", "data-label": "Turns", text: String(s.events || 0) }),
      A.el("td", { class: "num", "data-label": "Subagents", text: String(s.children || 0) }),
      A.el("td", { class: "clip small latest", "data-label": "Latest turn", text: last.slice(0, 140) }),
      A.el("td", { "data-label": "Started" }, [A.timeEl(s.startedAt)])
    ]);
  }

  function render(list) {
    body.innerHTML = "";
    list.forEach(function (s) { body.appendChild(row(s)); });
    table.hidden = !list.length;
    empty.hidden = !!list.length;
  }

  /* The session frames the stream delivered (newest last) and how many so far: a list read in
     flight when a frame came may answer the state from before it, so those frames are applied
     again on top of the list. */
  var liveFrames = [], liveCount = 0;

  function load() {
    var q = filter.value ? "?status=" + encodeURIComponent(filter.value) : "";
    var mark = liveCount;
    A.api("GET", "/v1/agents/sessions" + q).then(function (res) {
      if (!res.ok || !res.body) { A.showError(errorBox, res, "Could not list sessions: "); return; }
      errorBox.hidden = true;
      var listed = {};
      (res.body.sessions || []).forEach(function (s) { listed[s.id] = s.updatedAt || ""; });
      render(res.body.sessions || []);
      // A frame older than the listed row (frames of several processes can cross) is not
      // re-applied; `updatedAt` is to the second, so on a tie the frame wins.
      liveFrames.slice(Math.max(0, liveFrames.length - (liveCount - mark))).forEach(function (f) {
        if (!f.updatedAt || !listed[f.id] || f.updatedAt >= listed[f.id]) { upsert(f); if (f.updatedAt) listed[f.id] = f.updatedAt; }
      });
    });
  }

  function upsert(s) {
    if (s.parentSessionId) return; // roots only, like the list
    var existing = body.querySelector('tr[data-session="' + CSS.escape(s.id) + '"]');
    if (filter.value && s.status !== filter.value) { // it left the filtered status
      if (existing) existing.remove();
      table.hidden = !body.children.length; empty.hidden = !!body.children.length;
      return;
    }
    var fresh = row(s);
    if (existing) {
      // a session frame carries no lastEvent; keep the one shown
      var keep = existing.children[4].textContent;
      if (!s.lastEvent) fresh.children[4].textContent = keep;
      body.replaceChild(fresh, existing);
    } else body.insertBefore(fresh, body.firstChild);
    table.hidden = false; empty.hidden = true;
  }

  filter.addEventListener("change", load);
  load();
  if (window.EventSource) {
    var source = new EventSource("/v1/agents/sessions/stream");
    source.onopen = function () { streamState.textContent = "● live"; };
    source.onerror = function () { streamState.textContent = source.readyState === EventSource.CLOSED ? "live updates unavailable" : "reconnecting…"; };
    source.addEventListener(A.vocab.enums.StreamFrameKind.SESSION, function (e) {
      var s = JSON.parse(e.data).session;
      if (!s) return;
      liveFrames.push(s);
      if (liveFrames.length > 100) liveFrames.shift();
      liveCount++;
      upsert(s);
    });
    source.addEventListener(A.vocab.enums.StreamFrameKind.EVENT, function (e) {
      var ev = JSON.parse(e.data).event;
      var tr = ev && body.querySelector('tr[data-session="' + CSS.escape(ev.sessionId) + '"]');
      if (!tr) return;
      if (Number(tr.children[2].textContent) < ev.seq) tr.children[2].textContent = String(ev.seq);
      tr.children[4].textContent = latest(ev.kind, A.payloadText(ev.payload)).slice(0, 140);
    });
  }
})();
