/* The run form of an agent page: POST /v1/agents/{id}/run with the session cookie, show the
   run's live session while it runs (from the org's SSE stream), then its output or error.
   A 502 body is the failed run itself (spec 003), and so is a 400 context_length_exceeded (decision 1530), shown as the run's error, not a crash. */
(function () {
  "use strict";
  var A = window.Agents;
  var panel = document.getElementById("run-panel");
  if (!panel) return;
  var form = document.getElementById("run-form");
  var button = document.getElementById("run-button");
  var state = document.getElementById("run-state");
  var live = document.getElementById("run-live");
  var eventsList = document.getElementById("run-events");
  var sessionLink = document.getElementById("run-session-link");
  var sessionStatus = document.getElementById("run-session-status");
  var result = document.getElementById("run-result");
  var errorBox = document.getElementById("run-error");
  var agentName = panel.dataset.agent;
  var actor = panel.dataset.actor;

  var source = null, sessionId = null, buffered = {}, shown = {};

  function showSession(id) {
    if (sessionId === id) return;
    sessionId = id;
    shown = {};
    eventsList.innerHTML = "";
    live.hidden = false;
    sessionLink.textContent = id;
    sessionLink.href = panel.dataset.sessionBase + id + "/";
    (buffered[id] || []).forEach(addEvent);
  }

  function addEvent(ev) {
    if (shown[ev.seq]) return;
    shown[ev.seq] = true;
    var item = A.eventItem(ev, true);
    var after = null;
    eventsList.querySelectorAll("li").forEach(function (li) { if (!after && Number(li.dataset.seq) > ev.seq) after = li; });
    eventsList.insertBefore(item, after);
  }

  function setStatus(s) { sessionStatus.innerHTML = ""; sessionStatus.appendChild(A.badge(s)); }

  function listen() {
    return new Promise(function (resolve) {
      if (!window.EventSource) return resolve();
      source = new EventSource(panel.dataset.streamUrl);
      var done = false;
      function ready() { if (!done) { done = true; resolve(); } }
      source.onopen = ready;
      source.onerror = ready; // no stream on this deployment: run without the live view
      setTimeout(ready, 1500);
      source.addEventListener(A.vocab.enums.StreamFrameKind.SESSION, function (e) {
        var s = JSON.parse(e.data).session;
        if (!s) return;
        // The run's root session: this agent, started by this user, after the Run press.
        if (!sessionId && s.agent === agentName && (!actor || !s.actor || s.actor === actor) && !s.parentSessionId) showSession(s.id);
        if (s.id === sessionId) setStatus(s.status);
      });
      source.addEventListener(A.vocab.enums.StreamFrameKind.EVENT, function (e) {
        var ev = JSON.parse(e.data).event;
        if (!ev) return;
        (buffered[ev.sessionId] = buffered[ev.sessionId] || []).push(ev);
        if (ev.sessionId === sessionId) addEvent(ev);
      });
    });
  }

  function showRun(run) {
    result.hidden = false;
    var statusNode = document.getElementById("run-status");
    statusNode.innerHTML = "";
    // A user's stop is "stopped", not a red "error" (the run's finishReason says which).
    var stopped = run.finishReason === A.vocab.word.stopped;
    statusNode.appendChild(A.badge(stopped ? A.vocab.word.stopped : run.status));
    var out = document.getElementById("run-output");
    out.hidden = false;
    out.textContent = run.error && !stopped ? run.error : (run.output || (stopped ? "Stopped before a reply was written." : ""));
    out.classList.toggle("failed", !!run.error && !stopped);
    var meta = [run.id, run.model, run.durationMs + " ms"];
    if (run.promptTokens != null) meta.push(run.promptTokens + "+" + (run.completionTokens || 0) + " tokens");
    // A reply cut by the token limit is an answer, marked as cut (issue 31).
    if (run.finishReason === A.vocab.word.truncated) meta.push("✂ cut off at the token limit (maxTokens)");
    statusNode.dataset.finish = run.finishReason || "";
    document.getElementById("run-meta").textContent = meta.join(" · ");
    if (run.sessionId) showSession(run.sessionId);
  }

  /* The result is shown once: when the live turns already show the reply as the assistant's
     last turn, the result box keeps only the status and the figures. */
  function showOnce(run) {
    var out = document.getElementById("run-output");
    var replies = eventsList.querySelectorAll('li[data-speaker="assistant"] .body .text');
    var last = replies.length ? replies[replies.length - 1].textContent : null;
    out.hidden = !run.error && last !== null && last.trim() === (run.output || "").trim();
  }

  function backfill() {
    if (!sessionId) return Promise.resolve();
    return A.api("GET", "/v1/agents/sessions/" + encodeURIComponent(sessionId)).then(function (res) {
      if (!res.ok || !res.body) return;
      setStatus(res.body.status);
      (res.body.recentEvents || []).forEach(addEvent);
    });
  }

  /* Re-read this page and swap in its server-rendered history and run count. */
  function refreshHistory() {
    return fetch(window.location.href, { credentials: "same-origin" }).then(function (res) { return res.ok ? res.text() : null; }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      ["recent-runs", "run-count"].forEach(function (id) {
        var fresh = doc.getElementById(id), old = document.getElementById(id);
        if (fresh && old) { old.replaceWith(fresh); A.localizeTimes(fresh); }
      });
    }, function () {});
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var input = document.getElementById("run-input").value;
    button.disabled = true;
    state.textContent = "Running…";
    errorBox.hidden = true;
    result.hidden = true;
    live.hidden = true;
    sessionId = null; buffered = {};
    listen().then(function () {
      return A.api("POST", panel.dataset.runUrl, { input: input });
    }).then(function (res) {
      if ((res.status === 200 || res.status === 502 || res.status === 400) && res.body && res.body.id) {
        showRun(res.body);
        state.textContent = res.status === 200 ? "Finished." : res.body.finishReason === A.vocab.word.stopped ? "Stopped." :
          "The run failed; it was recorded with its error.";
        return Promise.all([backfill(), refreshHistory()]).then(function () { showOnce(res.body); });
      }
      errorBox.textContent = A.errorText(res);
      errorBox.hidden = false;
      state.textContent = "";
    }).then(function () {
      button.disabled = false;
      setTimeout(function () { if (source) source.close(); }, 500);
    });
  });
})();
