/* One session: its facts, its flow tree, its turns streaming in over EventSource, and the
   pause/resume/stop/message controls (POST …/{id}/{command} → {command, event, forwarded}).

   A first read learns the flow's root; the stream of that flow is opened; a second read closes
   any gap between the two. Turns are kept by seq, so a replayed or re-read turn is never shown
   twice. The browser reconnects by
   itself after a drop and sends Last-Event-ID; the server replays what was missed. */
(function () {
  "use strict";
  var A = window.Agents;
  var page = document.getElementById("session-page");
  if (!page) return;
  var id = page.dataset.session;
  var base = page.dataset.sessionBase;
  var api = "/v1/agents/sessions/" + encodeURIComponent(id);
  var eventsList = document.getElementById("events");
  var eventsEmpty = document.getElementById("events-empty");
  var errorBox = document.getElementById("session-error");
  var streamState = document.getElementById("stream-state");
  var controlResult = document.getElementById("control-result");
  var seen = {}, session = null, source = null, treeTimer = null;
  /* The session frames this page's stream delivered (newest last) and how many so far: a read is
     served apart from the writes, so a read in flight when a frame came may answer the state from
     before it — the frames win over that answer. */
  var liveFrames = [], liveCount = 0;
  var stopping = false; // this page sent a stop: "stopping…" until the session is terminal, then "stopped"

  /* A run's summary turn says why it ended: a user's stop ends the session "error", shown "stopped". */
  var stoppedRun = false;
  function showStatus() {
    if (!session) return;
    /* The permission table: a member stops only runs they started (runs.approvals.answer_rule). */
    var stopButton = document.querySelector('button[data-command="stop"]');
    if (stopButton) stopButton.hidden = !A.mayAnswer(session.actor);
    if (session.finishReason === (A.vocab.word || {}).stopped) stoppedRun = true;
    var status = document.getElementById("session-status");
    status.innerHTML = "";
    status.appendChild(A.badge(stoppedRun && session.status === (A.vocab.word || {}).sessionError ? A.vocab.word.stopped : session.status));
  }

  /* Say in words how a finished session ended (unless this page's own stop already said "stopped"). */
  function noteFinished() {
    if (!session || !A.isTerminal(session.status) || document.getElementById("stop-state")) return;
    controlResult.textContent = (stoppedRun ? "This session was stopped" : session.status === (A.vocab.word || {}).sessionError ?
      "This session ended with an error" : "This session has finished") + ": a finished session cannot be steered.";
  }

  function addEvent(ev, fresh) {
    if (ev.sessionId && ev.sessionId !== id) return;
    if (seen[ev.seq]) return;
    seen[ev.seq] = true;
    var p = ev.payload;
    if (p && typeof p === "object" && p.finishReason === (A.vocab.word || {}).stopped && !stoppedRun) { stoppedRun = true; showStatus(); noteFinished(); }
    var item = A.eventItem(ev, fresh);
    var before = null;
    eventsList.querySelectorAll("li").forEach(function (li) { if (!before && Number(li.dataset.seq) > ev.seq) before = li; });
    eventsList.insertBefore(item, before);
    eventsEmpty.hidden = true;
    var turns = document.getElementById("fact-turns");
    if (turns && Number(turns.textContent) < ev.seq) turns.textContent = String(ev.seq);
  }

  /* "● live" only while the session works: a finished one has nothing coming (its stream stays
     open for a reset or a late subagent turn, quietly). */
  function showLive() {
    if (streamState.dataset.state !== "open") return;
    streamState.textContent = session && A.isTerminal(session.status) ? "" : "● live";
  }

  function fact(label, value, code, id) {
    if (!value && value !== 0) return null;
    var dd = A.el("dd", id ? { id: id } : {}, [value instanceof Node ? value : code ? A.el("code", { text: String(value) }) : String(value)]);
    return A.el("div", {}, [A.el("dt", { text: label }), dd]);
  }

  function showSession(s) {
    session = s;
    document.getElementById("session-title").textContent = s.title || s.agent || s.id;
    showStatus();
    var facts = document.getElementById("session-facts");
    facts.innerHTML = "";
    [fact("Id", s.id, true), fact("Agent", s.agent), fact("Actor", s.actor), fact("Started", s.startedAt ? A.timeEl(s.startedAt) : null),
     fact("Ended", s.endedAt ? A.timeEl(s.endedAt) : null), fact("Turns", Math.max(s.events || 0, Object.keys(seen).length), false, "fact-turns"), fact("Repo", s.repo), fact("Project", s.project),
     fact("Target", s.target, true), fact("Parent", s.parentSessionId, true)].forEach(function (n) { if (n) facts.appendChild(n); });
    var finished = A.isTerminal(s.status);
    showLive();
    document.querySelectorAll("#controls button, #control-message").forEach(function (b) { b.disabled = finished; });
    if (finished && stopping) {
      stopping = false;
      controlResult.innerHTML = "";
      controlResult.appendChild(A.el("span", { class: "control-ok", id: "stop-state", "data-state": "stopped", "data-command": "stop", text: "stopped" }));
    } else if (finished) {
      noteFinished();
    }
  }

  function treeNode(node) {
    var s = node.session;
    var link = A.el("a", { href: base + encodeURIComponent(s.id) + "/", text: (s.title || s.agent) + " ", class: s.id === id ? "current" : "" });
    var li = A.el("li", { "data-session": s.id }, [link, A.badge(s.status), A.el("span", { class: "muted small", text: " " + (s.events || 0) + " turns" })]);
    if (node.children && node.children.length) li.appendChild(A.el("ul", {}, node.children.map(treeNode)));
    return li;
  }

  function loadTree() {
    var root = (session && session.rootSessionId) || id;
    A.api("GET", "/v1/agents/sessions/" + encodeURIComponent(root) + "/tree").then(function (res) {
      var tree = document.getElementById("tree");
      tree.innerHTML = "";
      if (!res.ok || !res.body) { tree.appendChild(A.el("li", { class: "err", text: "Could not load the flow: " + A.errorText(res) })); return; }
      tree.appendChild(treeNode(res.body));
    });
  }

  function scheduleTree() { clearTimeout(treeTimer); treeTimer = setTimeout(loadTree, 300); }

  /* A turn of this session arrived while it is not finished: read the session again. The
     process that wrote the turn may be one this page's stream gets no `session` frames from
     (a worker resuming an approved run, without Redis); the store holds the truth, and a run's
     end commits its summary turn and the session's status together (issue 57). */
  var rereadTimer = null;
  function scheduleReread() {
    if (session && A.isTerminal(session.status)) return;
    clearTimeout(rereadTimer);
    rereadTimer = setTimeout(read, 300);
  }

  function openStream() {
    if (!window.EventSource) return Promise.resolve();
    return new Promise(function (resolve) {
      var settled = false;
      function done() { if (!settled) { settled = true; resolve(); } }
      // Narrow to this flow; the root is this id or learnt from the first read.
      var root = (session && session.rootSessionId) || "";
      source = new EventSource("/v1/agents/sessions/stream" + (root ? "?root=" + encodeURIComponent(root) : ""));
      source.onopen = function () { streamState.dataset.state = "open"; showLive(); done(); };
      source.onerror = function () {
        streamState.dataset.state = source.readyState === EventSource.CLOSED ? "closed" : "reconnecting";
        streamState.textContent = source.readyState === EventSource.CLOSED ? "live updates unavailable" : "reconnecting…";
        done();
      };
      setTimeout(done, 2000);
      // The server's log is behind the last id this page saw (restored or reset): re-read it.
      source.addEventListener(A.vocab.enums.StreamFrameKind.RESET, function () { read(); scheduleTree(); });
      source.addEventListener(A.vocab.enums.StreamFrameKind.EVENT, function (e) {
        var ev = JSON.parse(e.data).event;
        if (ev) {
          addEvent(ev, true);
          scheduleTree();
          if (ev.sessionId === id) scheduleReread();
          if (window.AgentsApprovals) window.AgentsApprovals.refresh();
        }
      });
      source.addEventListener(A.vocab.enums.StreamFrameKind.SESSION, function (e) {
        var s = JSON.parse(e.data).session;
        if (!s) return;
        if (s.id === id) {
          liveFrames.push(s);
          if (liveFrames.length > 100) liveFrames.shift();
          liveCount++;
          showSession(Object.assign({}, session || {}, s));
        }
        scheduleTree();
      });
    });
  }

  function read() {
    var mark = liveCount;
    return A.api("GET", api).then(function (res) {
      if (!res.ok || !res.body) { A.showError(errorBox, res, "Could not load this session: "); return false; }
      var s = res.body;
      // A frame older than the answer (frames of several processes can cross) is not re-applied;
      // `updatedAt` is to the second, so on a tie the frame wins.
      liveFrames.slice(Math.max(0, liveFrames.length - (liveCount - mark))).forEach(function (f) {
        if (!f.updatedAt || !s.updatedAt || f.updatedAt >= s.updatedAt) s = Object.assign({}, s, f);
      });
      showSession(s);
      var recent = res.body.recentEvents || [];
      recent.forEach(function (ev) { addEvent(ev, false); });
      document.getElementById("events-note").textContent = (res.body.events || 0) > recent.length ? "(the newest " + recent.length + " of " + res.body.events + ")" : "";
      eventsEmpty.hidden = eventsList.children.length > 0;
      return true;
    });
  }

  function control(command) {
    var body = {};
    var input = document.getElementById("control-message");
    if (command === "message" || (command === "stop" && input.value)) body.message = input.value;
    controlResult.textContent = "Sending " + command + "…";
    A.api("POST", api + "/" + command, body).then(function (res) {
      if (res.ok && res.body) {
        var ev = res.body.event || {};
        addEvent(ev, true);
        controlResult.innerHTML = "";
        if (command === "stop") { // an intent: the run stops within a second; the session's end says when
          stopping = true;
          controlResult.appendChild(A.el("span", { class: "control-ok", id: "stop-state", "data-state": "stopping", "data-command": res.body.command,
            "data-forwarded": String(res.body.forwarded), text: "stopping…" }));
          setTimeout(function stillStopping() { if (stopping) read().then(function () { if (stopping) setTimeout(stillStopping, 1000); }); }, 1000);
          return;
        }
        controlResult.appendChild(A.el("span", { class: "control-ok", "data-command": res.body.command, "data-forwarded": String(res.body.forwarded),
          text: "Sent (turn #" + ev.seq + "): the agent " + (res.body.forwarded ? "gets it now." : "reads it before its next step.") }));
        if (command === "message") input.value = "";
        return;
      }
      controlResult.innerHTML = "";
      var box = A.el("div", { class: "alert error", role: "alert" });
      controlResult.appendChild(box);
      A.showError(box, res);
    });
  }

  document.querySelectorAll("#controls [data-command]").forEach(function (b) {
    b.addEventListener("click", function () { control(b.dataset.command); });
  });

  var kind = document.getElementById("append-kind");
  (A.vocab.eventKindAppendable || A.vocab.eventKind || []).forEach(function (k) { kind.appendChild(A.el("option", { value: k, text: k })); });
  document.getElementById("append-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var text = document.getElementById("append-text");
    var out = document.getElementById("append-result");
    A.api("POST", api + "/events", { kind: kind.value, payload: { text: text.value } }).then(function (res) {
      out.innerHTML = "";
      if (res.ok && res.body) {
        addEvent(res.body, true);
        out.appendChild(A.el("p", { class: "small pos", text: "Stored as turn #" + res.body.seq + "." }));
        text.value = "";
        return;
      }
      var box = A.el("div", { class: "alert error", role: "alert", id: "append-error" });
      out.appendChild(box);
      A.showError(box, res, res.status === 422 ? "Refused, nothing was stored: " : "");
    });
  });

  // Read once to learn the root, then stream that flow, then re-read to close any gap.
  read().then(function (ok) {
    if (!ok) return;
    openStream().then(function () { read(); loadTree(); });
  });
})();
