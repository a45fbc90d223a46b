/* The chat page: pick an agent or a preset, keep conversations, and watch each reply stream in.

   A round is POST /v1/agents/chat with `stream: true`; its body is Server-Sent Events read
   with fetch (EventSource cannot POST): `start` (runId, sessionId: the stop button and the
   session link), `delta` (a piece of the reply), `tool` (a tool call run on the server: a
   card), `ops` (tool calls handed to the client: a card), then `chat` (the recorded round:
   reply, actions, ops, conversationId, runId, run), `error`, or `approval` (issue 57: the run
   waits for a person to approve a tool call — a notice with the requests, Approve/Deny for whoever
   may answer, and the reply added once the resumed run finishes). A refusal before the stream
   (400, 402, 404, 409, 422…) is an ordinary JSON error shown in words, with the findings of a
   refused secret. Stop is POST /v1/agents/sessions/{sessionId}/stop. A reply the user stopped
   is kept and shown marked "stopped". */
(function () {
  "use strict";
  var A = window.Agents;
  var FRAME = A.vocab.enums.ReplyFrame, ROLE = A.vocab.enums.ChatRole;  // the stream's frame words and the chat roles (static/console/vocabulary.js)
  var page = document.getElementById("chat-page");
  if (!page) return;
  var list = document.getElementById("chat-conversations");
  var more = document.getElementById("chat-more");
  var messages = document.getElementById("chat-messages");
  var empty = document.getElementById("chat-empty");
  var withSelect = document.getElementById("chat-with");
  var title = document.getElementById("chat-title");
  var sessionLink = document.getElementById("chat-session");
  var errorBox = document.getElementById("chat-error");
  var form = document.getElementById("chat-form");
  var input = document.getElementById("chat-input");
  var send = document.getElementById("chat-send");
  var stop = document.getElementById("chat-stop");
  var state = document.getElementById("chat-state");
  var chatBase = page.dataset.chatBase;
  var conversationId = page.dataset.conversation || "";
  var running = null; // {sessionId, runId} of the round streaming now
  var nextCursor = null;

  /* The share panel of the open conversation (static/console/shares.js): shown by "Share". */
  var shareToggle = document.getElementById("chat-share-toggle"), sharePanel = document.getElementById("chat-share");
  var startedBy = ""; // who started the open conversation (its `createdBy`): who may share it, with the org's admins
  var sharing = window.AgentsShares ? window.AgentsShares.mount(sharePanel, function () {
    return conversationId ? { kind: page.dataset.shareSubject, id: conversationId, startedBy: startedBy } : null;
  }) : null;
  function shareFollows() {
    shareToggle.hidden = !conversationId;
    if (!conversationId) { sharePanel.hidden = true; shareToggle.setAttribute("aria-expanded", "false"); }
    if (sharing && !sharePanel.hidden) sharing.refresh();
  }
  shareToggle.addEventListener("click", function () {
    sharePanel.hidden = !sharePanel.hidden;
    shareToggle.setAttribute("aria-expanded", String(!sharePanel.hidden));
    if (sharing && !sharePanel.hidden) sharing.refresh();
  });

  function scrollDown() { messages.scrollTop = messages.scrollHeight; }

  function bubble(role, text, extra) {
    empty.hidden = true;
    var response = role === ROLE.USER && window.Artifacts ? window.Artifacts.responseCard(text) : null;
    var li = A.el("li", { class: role + (extra ? " " + extra : ""), "data-role": role }, [
      A.el("div", { class: "who", text: role }),
      response || A.el("div", { class: "bubble", text: text || "" })
    ]);
    messages.appendChild(li);
    scrollDown();
    return li;
  }

  function toolCard(action) {
    empty.hidden = true;
    var failed = action.error !== undefined;
    var li = A.el("li", { class: "tool", "data-role": "tool", "data-tool": action.name || "" }, [
      A.el("div", { class: "tool-card" + (failed ? " failed" : "") }, [
        A.el("div", { class: "tool-name" }, [A.el("code", { text: action.name || "tool" }), failed ? A.el("span", { class: "err", text: " failed" }) : null]),
        A.el("div", { class: "tool-part" }, [A.el("span", { class: "muted small", text: "arguments" }), A.jsonBlock(action.args || {})]),
        A.el("div", { class: "tool-part" }, [A.el("span", { class: "muted small", text: failed ? "error" : "result" }), A.jsonBlock(failed ? action.error : action.result)])
      ])
    ]);
    messages.appendChild(li);
    scrollDown();
  }

  /* What an artifact form needs from the page: the conversation, and a way to send a turn. */
  var artifactContext = {
    conversationId: function () { return conversationId; },
    send: function (text) { return whenIdle().then(function () { return round(text); }); }
  };

  function whenIdle() {
    return new Promise(function (resolve) {
      (function wait() { if (!running && !send.disabled) resolve(); else setTimeout(wait, 50); })();
    });
  }

  /* Ops handed to the client: an `artifact` op is drawn by window.Artifacts (spec 001 forms and
     cards, through the client_action executor); any other op as a generic card. */
  function opsCard(ops) {
    if (!ops || !ops.length) return;
    empty.hidden = true;
    var generic = [];
    ops.forEach(function (op) {
      if (op.name === "artifact" && window.Artifacts) {
        messages.appendChild(A.el("li", { class: "ops artifact", "data-role": "artifact" }, [window.Artifacts.render(op.args || {}, artifactContext)]));
      } else {
        generic.push(op);
      }
    });
    if (generic.length) {
      messages.appendChild(A.el("li", { class: "ops", "data-role": "ops" }, [
        A.el("div", { class: "tool-card" }, [A.el("div", { class: "tool-name", text: "For the client to run" })].concat(generic.map(function (op) {
          return A.el("div", { class: "tool-part", "data-op": op.name }, [A.el("code", { text: op.name }), A.jsonBlock(op.args || {})]);
        })))
      ]));
    }
    scrollDown();
  }

  /* Mark reply `li` as stopped by the user: grey words, never an error. */
  function markStopped(li) {
    li.classList.add("stopped");
    li.dataset.finish = A.vocab.word.stopped;
    li.appendChild(A.el("div", { class: "stop-note", text: "stopped" }));
  }

  function showStored(message) {
    if (message.role === ROLE.TOOL) { bubble("tool", message.content); return; }
    var li = bubble(message.role, message.content);
    li.dataset.message = message.id || "";
    if (message.finishReason === A.vocab.word.stopped) markStopped(li);
    var calls = message.toolCalls;
    if (calls && calls.actions) calls.actions.forEach(toolCard);
    if (calls && calls.ops) opsCard(calls.ops);
  }

  /* --- A round that waits for approval (issue 57) ------------------------------------------ */

  var waiting = null; // {runId, sessionId, source, li} of the round waiting for a person

  function stopWatching() {
    if (waiting && waiting.source) waiting.source.close();
    waiting = null;
  }

  /* Show the notice of run `run` (its view, with `approvals`) waiting in this conversation, with
     Approve/Deny for a viewer the page's answer rule allows; follow its session until the run
     ends, then show the conversation again with the reply the resumed run added. */
  function showWaiting(run) {
    stopWatching();
    var earlier = document.getElementById("chat-waiting"); // one notice: the round waiting now
    if (earlier) earlier.closest("li").remove();
    empty.hidden = true;
    var asked = (run.approvals || []).filter(function (a) { return a.needsApproval; });
    var box = A.el("div", { class: "approval-box", "data-session": run.sessionId || "" }, [A.el("ul", { class: "approval-list" })]);
    var mine = A.mayAnswer(run.actor);
    var li = A.el("li", { class: "waiting", "data-role": "approval", "data-run": run.id }, [
      A.el("div", { class: "waiting-card", id: "chat-waiting" }, [
        A.el("div", { class: "waiting-title", text: "Waiting for approval" }),
        A.el("p", { class: "muted small", text: "The agent asks before calling " + asked.map(function (a) { return a.tool; }).join(", ") +
          ". The run holds nothing while it waits; the reply appears here once it is answered." +
          (mine ? "" : " Only " + (run.actor || "the user who started it") + " or an org admin may answer.") }),
        box
      ])
    ]);
    messages.appendChild(li);
    scrollDown();
    state.textContent = "Waiting for approval…";
    if (window.AgentsApprovals) window.AgentsApprovals.mount(box, { session: run.sessionId, onChange: function () { check(); } });
    waiting = { runId: run.id, sessionId: run.sessionId, source: null, li: li };
    var mark = waiting;
    function check() {
      if (waiting !== mark) return;
      A.api("GET", "/v1/agents/runs/" + encodeURIComponent(run.id)).then(function (res) {
        if (waiting !== mark || !res.ok || !res.body) return;
        if (res.body.status === A.vocab.word.waiting || A.vocab.runStatus.indexOf(res.body.status) < 0) return;
        if (res.body.status !== A.vocab.enums.RunStatus.OK && res.body.status !== A.vocab.word.runError) {
          state.textContent = "Approved: the run carries on…";
          return;
        }
        stopWatching();
        state.textContent = res.body.finishReason === A.vocab.word.stopped ? "Stopped." :
          res.body.status === A.vocab.word.runError ? "The round ended: " + (res.body.error || "it failed") : "";
        open(conversationId, false).then(function () { return loadConversations(false); });
      });
    }
    if (window.EventSource && run.sessionId) {
      // The run's turns arrive here whichever process resumes it (the store is read behind the bus).
      var source = new EventSource("/v1/agents/sessions/stream?root=" + encodeURIComponent(run.sessionId));
      waiting.source = source;
      var timer = null;
      var soon = function () { clearTimeout(timer); timer = setTimeout(check, 200); };
      source.addEventListener(A.vocab.enums.StreamFrameKind.EVENT, soon);
      source.addEventListener(A.vocab.enums.StreamFrameKind.SESSION, soon);
      source.addEventListener(A.vocab.enums.StreamFrameKind.RESET, soon);
    }
    check();
  }

  /* The conversation's last round may wait for approval: its last turn is the user's, with a run. */
  function resumeWaiting(stored) {
    var last = stored[stored.length - 1];
    if (!last || last.role !== ROLE.USER || !last.runId) return;
    var id = conversationId;
    A.api("GET", "/v1/agents/runs/" + encodeURIComponent(last.runId)).then(function (res) {
      if (id !== conversationId || running || !res.ok || !res.body) return;
      if (res.body.status === A.vocab.word.waiting) showWaiting(res.body);
    });
  }

  function mark() {
    list.querySelectorAll("a[data-conversation]").forEach(function (a) { a.classList.toggle("current", a.dataset.conversation === conversationId); });
  }

  function conversationItem(c) {
    var a = A.el("a", { href: chatBase + encodeURIComponent(c.id) + "/", "data-conversation": c.id, title: A.fmtTime(c.updatedAt), text: c.title || "New conversation" });
    a.addEventListener("click", function (e) { e.preventDefault(); open(c.id, true); });
    return A.el("li", {}, [a]);
  }

  function loadConversations(append) {
    var url = "/v1/agents/chat/conversations?limit=30" + (append && nextCursor ? "&cursor=" + encodeURIComponent(nextCursor) : "");
    return A.api("GET", url).then(function (res) {
      if (!append) list.innerHTML = "";
      if (!res.ok || !res.body) { list.appendChild(A.el("li", { class: "err", text: "Could not load conversations: " + A.errorText(res) })); return; }
      var rows = res.body.conversations || [];
      if (!rows.length && !append) list.appendChild(A.el("li", { class: "muted", id: "chat-none", text: "No conversations yet." }));
      rows.forEach(function (c) { list.appendChild(conversationItem(c)); });
      nextCursor = res.body.nextCursor || null;
      more.hidden = !nextCursor;
      mark();
    });
  }

  function open(id, push) {
    stopWatching();
    conversationId = id;
    startedBy = "";
    messages.innerHTML = "";
    errorBox.hidden = true;
    sessionLink.hidden = true;
    empty.hidden = false;
    title.textContent = "";
    if (push) history.pushState({ conversation: id }, "", id ? chatBase + encodeURIComponent(id) + "/" : chatBase);
    mark();
    shareFollows();
    if (!id) return Promise.resolve();
    return A.api("GET", "/v1/agents/chat/conversations/" + encodeURIComponent(id)).then(function (res) {
      if (!res.ok || !res.body) { A.showError(errorBox, res, "Could not open this conversation: "); conversationId = ""; return; }
      title.textContent = res.body.title || "";
      startedBy = res.body.createdBy || "";
      if (sharing && !sharePanel.hidden) sharing.refresh();
      (res.body.messages || []).forEach(showStored);
      resumeWaiting(res.body.messages || []);
    });
  }

  function loadTargets() {
    return Promise.all([A.api("GET", "/v1/agents/chat/presets"), A.api("GET", "/v1/agents?limit=200")]).then(function (r) {
      withSelect.innerHTML = "";
      var presets = (r[0].body && r[0].body.presets) || [];
      var agents = ((r[1].body && r[1].body.agents) || []).filter(function (a) { return a.hosting !== A.vocab.word.external; });
      if (agents.length) {
        withSelect.appendChild(A.el("optgroup", { label: "Agents" }, agents.map(function (a) { return A.el("option", { value: "agent:" + a.name, text: a.name }); })));
      }
      withSelect.appendChild(A.el("optgroup", { label: "Presets" }, presets.map(function (p) {
        return A.el("option", { value: "preset:" + p.id, text: p.title ? p.title + " (" + p.id + ")" : p.id });
      })));
      var wanted = new URLSearchParams(location.search).get("with") || "preset:assistant";
      if (withSelect.querySelector('option[value="' + wanted + '"]')) withSelect.value = wanted;
    });
  }

  /* Read one SSE body with fetch: call on(event, data) per frame; resolves when it ends. */
  function readFrames(response, on) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function frame(block) {
      var event = "message", data = [];
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event:") === 0) event = line.slice(6).trim();
        else if (line.indexOf("data:") === 0) data.push(line.slice(5).replace(/^ /, ""));
      });
      if (!data.length) return;
      var parsed = null;
      try { parsed = JSON.parse(data.join("\n")); } catch (e) { parsed = data.join("\n"); }
      on(event, parsed);
    }
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) { if (buffer.trim()) frame(buffer); return; }
        buffer += decoder.decode(chunk.value, { stream: true });
        var at;
        while ((at = buffer.indexOf("\n\n")) >= 0) { frame(buffer.slice(0, at)); buffer = buffer.slice(at + 2); }
        return pump();
      });
    }
    return pump();
  }

  function busy(on) {
    send.disabled = on;
    stop.hidden = !on;
    stop.disabled = false;
    input.disabled = on;
  }

  function round(text) {
    errorBox.hidden = true;
    stopWatching();
    var body = { messages: [{ role: "user", content: text }], stream: true };
    var who = withSelect.value || "preset:assistant";
    if (who.indexOf("agent:") === 0) body.agent = who.slice(6); else body.preset = who.slice(7);
    if (conversationId) body.conversationId = conversationId;
    var mine = bubble("user", text, "pending");
    var reply = null, final = null;
    busy(true);
    state.textContent = "Thinking…";
    return fetch("/v1/agents/chat", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRFToken": A.csrfToken() },
      body: JSON.stringify(body)
    }).then(function (response) {
      var type = response.headers.get("content-type") || "";
      if (!response.ok || type.indexOf("text/event-stream") < 0) {
        return response.text().then(function (t) {
          var parsed = null;
          try { parsed = JSON.parse(t); } catch (e) { parsed = null; }
          mine.remove();
          if (!messages.children.length) empty.hidden = false;
          input.value = text; // nothing was stored: the message is the user's to fix and resend
          state.textContent = "";  // no "Thinking…" left behind: the error says what happened, nothing was sent
          A.showError(errorBox, { ok: false, status: response.status, body: parsed, text: t });
        });
      }
      var waited = null, errored = false;
      mine.classList.remove("pending");
      return readFrames(response, function (event, data) {
        if (event === FRAME.START) {
          running = data;
          if (data.conversationId && data.conversationId !== conversationId) {
            // A new conversation: its address and its place in the list now, not after a reload.
            conversationId = data.conversationId;
            startedBy = A.myActor(); // this round started it
            history.replaceState({ conversation: conversationId }, "", chatBase + encodeURIComponent(conversationId) + "/");
            loadConversations(false);
            shareFollows();
          }
          if (data.sessionId) { sessionLink.href = page.dataset.sessionBase + encodeURIComponent(data.sessionId) + "/"; sessionLink.hidden = false; }
        } else if (event === FRAME.DELTA) {
          if (!reply) { reply = bubble("assistant", "", "streaming"); state.textContent = "Writing…"; }
          reply.querySelector(".bubble").textContent += data.text || "";
          scrollDown();
        } else if (event === FRAME.TOOL) {
          toolCard(data);
          reply = null; // the next words are a new turn, after the tool
        } else if (event === FRAME.OPS) {
          opsCard(data.ops);
        } else if (event === FRAME.CHAT) {
          final = data;
        } else if (event === FRAME.APPROVAL) {
          waited = data;
        } else if (event === FRAME.ERROR) {
          if (data.run && data.run.finishReason === A.vocab.word.stopped) final = data; // the user's own stop: no error banner
          else { errored = true; A.showError(errorBox, { ok: false, status: data.status || 500, body: data, text: "" }); }
        }
      }).then(function () {
        if (reply) reply.classList.remove("streaming");
        if (waited) {
          // The run waits for a person: the conversation is kept (address, list), the reply comes later.
          if (waited.conversationId) conversationId = waited.conversationId;
          history.replaceState({ conversation: conversationId }, "", chatBase + encodeURIComponent(conversationId) + "/");
          showWaiting(Object.assign({}, waited.run || {}, { approvals: waited.approvals || [], sessionId: waited.sessionId || (waited.run || {}).sessionId }));
          return loadConversations(false);
        }
        if (!final) { state.textContent = errored ? "" : "The stream ended without a result."; return; }
        var run = final.run || {};
        if (run.finishReason === A.vocab.word.stopped) {
          markStopped(reply || bubble("assistant", run.output || "", ""));
        } else if (run.status === A.vocab.word.runError) {
          var failed = reply || bubble("assistant", "", "");
          failed.classList.add("failed");
          failed.querySelector(".bubble").textContent = (final.reply ? final.reply + "\n\n" : "") + "⚠ " + (run.error || "the round failed");
        } else if (!reply && final.reply) {
          reply = bubble("assistant", final.reply);
        }
        if (run.finishReason === A.vocab.word.truncated && reply) {  // cut by the token limit: say so (issue 31)
          reply.classList.add("truncated");
          reply.dataset.finish = run.finishReason;
          reply.appendChild(A.el("div", { class: "cut-note", text: "✂ cut off at the token limit (maxTokens)" }));
        }
        if (final.conversationId && final.conversationId !== conversationId) {
          conversationId = final.conversationId;
        }
        history.replaceState({ conversation: conversationId }, "", chatBase + encodeURIComponent(conversationId) + "/");
        state.textContent = run.finishReason === A.vocab.word.stopped ? "Stopped." :
          run.status === A.vocab.word.runError ? "The round failed; it was recorded with its error." : "";
        return loadConversations(false);
      });
    }, function (err) {
      state.textContent = "";
      A.showError(errorBox, { ok: false, status: 0, body: null, text: String(err) });
    }).then(function () {
      running = null;
      busy(false);
      A.refocus(input);  // not while the user types in a form the round drew
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value;
    if (!text.trim() || running) return;
    input.value = "";
    round(text);
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  stop.addEventListener("click", function () {
    if (!running || !running.sessionId) return;
    stop.disabled = true;
    state.textContent = "Stopping…";
    A.api("POST", "/v1/agents/sessions/" + encodeURIComponent(running.sessionId) + "/stop", { message: "stopped from the chat page" }).then(function (res) {
      if (!res.ok) A.showError(errorBox, res, "Could not stop: "); // a recorded stop is always 200 (issue 25)
    });
  });
  document.getElementById("chat-new").addEventListener("click", function () { open("", true); input.focus(); });
  more.addEventListener("click", function () { loadConversations(true); });
  window.addEventListener("popstate", function (e) { open((e.state && e.state.conversation) || "", false); });

  // Open the conversation the URL named, unless a round started meanwhile (re-opening would redraw
  // the page under the user, e.g. wipe a form they are filling in).
  var named = conversationId;
  Promise.all([loadTargets(), loadConversations(false)]).then(function () { if (named && named === conversationId && !running) open(named, false); });
})();
