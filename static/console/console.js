/* Shared helpers of the console: the vocabulary, the JSON API with the session cookie and CSRF
   token, badges, and small page behaviours. Exposed as window.Agents. No build step. */
(function () {
  "use strict";
  // The one vocabulary: static/console/vocabulary.js, generated from agents_site/vocabulary.py
  // (manage.py write_vocabulary_js) and loaded before this script; never a copy here.
  var vocab = window.AgentsVocabulary || { badge: {}, word: {}, enums: {} };

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  /* Call the JSON API. Resolves {ok, status, body} (body parsed JSON or null); never throws
     for an HTTP status, only for a network failure (reported as status 0). */
  function api(method, url, body) {
    var opts = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET" && method !== "HEAD") {
      opts.headers["X-CSRFToken"] = csrfToken();
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body || {});
    }
    return fetch(url, opts).then(function (res) {
      return res.text().then(function (text) {
        var parsed = null;
        try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = null; }
        return { ok: res.ok, status: res.status, body: parsed, text: text };
      });
    }, function (err) {
      return { ok: false, status: 0, body: null, text: String(err) };
    });
  }

  /* Say what went wrong in words: the error envelope's sentence and code, or the status. */
  function errorText(res) {
    if (res.status === 0) return "The server could not be reached (" + res.text + ").";
    if (res.body && res.body.error) return res.body.error + " (" + res.status + " " + (res.body.code || "") + ")";
    if (res.status === 404) return "Not available on this deployment (404).";
    return "The server answered " + res.status + ".";
  }

  /* The label a user reads for form field `name`: the text of its <label>, else the name in words. */
  function fieldLabel(name) {
    var input = document.querySelector('[name="' + (window.CSS && CSS.escape ? CSS.escape(name) : name) + '"]');
    var label = input && (input.closest("label") || (input.id && document.querySelector('label[for="' + input.id + '"]')));
    var text = label && label.firstChild ? label.firstChild.textContent.trim() : "";
    return text || String(name).replace(/_/g, " ");
  }

  /* The distinct `fields` of an error body as [{field, label, message}] (empty when none). */
  function fieldProblems(res) {
    var fields = res && res.body && Array.isArray(res.body.fields) ? res.body.fields : [];
    var seen = {}, out = [];
    fields.forEach(function (f) {
      if (!f || typeof f.field !== "string") return;
      var key = f.field + "\u0000" + f.message;
      if (seen[key]) return;
      seen[key] = true;
      out.push({ field: f.field, label: fieldLabel(f.field), message: String(f.message || "") });
    });
    return out;
  }

  /* Put the caret back in `field` once something the user waited on is done (a round, a send),
     unless they are typing in another text field meanwhile (a form the round drew, a password):
     the end of a slow answer must never move their keystrokes elsewhere. A button, a link or
     nothing in focus gives the caret back to `field`. */
  var TEXT_INPUTS = ["text", "search", "email", "url", "tel", "password", "number"];
  function typingIn(node) {
    if (!node || node.disabled) return false;
    return node.isContentEditable || node.tagName === "TEXTAREA" || (node.tagName === "INPUT" && TEXT_INPUTS.indexOf(node.type) >= 0);
  }
  function refocus(field) {
    var at = document.activeElement;
    if (at !== field && typingIn(at)) return;
    field.focus();
  }

  /* Fill `box` with the error in words and, for a refused secret (422 secret_in_transcript),
     the findings exactly as the API answered them: rule, severity, line, masked preview and
     fingerprint (the secret itself was never stored nor echoed). */
  function showError(box, res, prefix) {
    box.innerHTML = "";
    var problems = fieldProblems(res);
    if (problems.length > 1) {
      // Every refused field at once (the API's `fields`), not only the first one its sentence names.
      box.appendChild(el("p", { text: (prefix || "") + problems.length + " problems to fix:" }));
      box.appendChild(el("ul", { class: "error-list" }, problems.map(function (p) {
        return el("li", { "data-field": p.field, text: p.label + ": " + p.message });
      })));
    } else {
      box.appendChild(el("p", { text: (prefix || "") + errorText(res) }));
    }
    var findings = res.body && res.body.findings;
    if (findings && findings.length) {
      var rows = findings.map(function (f) {
        return el("tr", {}, [el("td", { text: f.rule }), el("td", { text: f.severity }), el("td", { class: "num", text: String(f.line) }),
          el("td", {}, [el("code", { text: f.preview })]), el("td", {}, [el("code", { class: "small", text: (f.fingerprint || "").slice(0, 16) + "…", title: f.fingerprint || "" })])]);
      });
      box.appendChild(el("table", { class: "table findings" }, [
        el("thead", {}, [el("tr", {}, ["Rule", "Severity", "Line", "Preview (masked)", "Fingerprint"].map(function (h) { return el("th", { text: h }); }))]),
        el("tbody", {}, rows)
      ]));
    }
    box.hidden = false;
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "class") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c != null) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }

  /* A status badge coloured by vocab.badge (grey for a word without a colour). */
  function badge(word) {
    var node = el("span", { class: "badge", "data-status": word || "", text: word || "" });
    node.style.setProperty("--badge", (vocab.badge || {})[word] || "#6b7280");
    return node;
  }

  /* The word a status is shown as, read with its finish reason: a user's stop ends a run or a
     session `error`/`failed`, but it is no failure — it reads "stopped" (grey) everywhere. */
  function statusWord(status, finishReason) {
    return finishReason === (vocab.word || {}).stopped ? vocab.word.stopped : status;
  }

  /* Whose approval requests this viewer may answer, as the server decided it for this page
     (`runs.approvals.answer_rule`, in the page as JSON): every run's (org admin) or the runs
     they started. Without it (a page that did not ask), no answer is offered. */
  var rules = {};
  function rule(name) {
    if (!rules[name]) {
      var node = document.getElementById(name);
      try { rules[name] = node ? JSON.parse(node.textContent) : {}; } catch (e) { rules[name] = {}; }
    }
    return rules[name];
  }
  function mayAnswer(startedBy) {
    var r = rule("agents-answer-rule");
    return !!r.all || (!!startedBy && r.actor === startedBy);
  }
  /* Whose conversations and sessions this viewer may share (`chat.shares.share_rule`, same shape). */
  function mayShare(startedBy) {
    var r = rule("agents-share-rule");
    return !!r.all || (!!startedBy && r.actor === startedBy);
  }
  /* The viewer's own actor ("<org>/<user>"), as the page's rules name it. */
  function myActor() { return rule("agents-share-rule").actor || ""; }

  /* THE date/time format of the console: the viewer's local date and time, to the minute
     ("2 Dec 2026, 04:03" in en-GB, "Dec 2, 2026, 4:03 AM" in en-US: the browser's language).
     Every date on every page passes here: server-rendered <time data-local> elements
     (console_tags.when) and the ones scripts build (timeEl). An unreadable value is shown as given. */
  var TIME_FORMAT = { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" };
  function fmtTime(iso) {
    if (!iso) return "";
    var d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toLocaleString([], TIME_FORMAT);
  }

  /* A <time> element for `iso`: the local time as text, the ISO timestamp in its tooltip. */
  function timeEl(iso, attrs) {
    var node = el("time", Object.assign({ datetime: iso || "", title: iso || "", text: fmtTime(iso) || "—" }, attrs || {}));
    return node;
  }

  /* "1 relation", "2 relations", "0 users": never "(s)" in what users read. */
  function plural(n, noun) { return n + " " + noun + (Number(n) === 1 ? "" : "s"); }

  /* Rewrite every server-rendered <time data-local> under `root` in the one format. */
  function localizeTimes(root) {
    (root || document).querySelectorAll("time[data-local]").forEach(function (t) {
      var iso = t.getAttribute("datetime");
      if (!iso) return;
      t.textContent = fmtTime(iso);
      if (!t.title) t.title = iso;
      t.removeAttribute("data-local");
      t.setAttribute("data-localized", "");
    });
  }

  /* The readable text of an event payload: its command, text, message, output, error or summary;
     "" when it has none (the data itself is then behind "Show the data", never a raw JSON line). */
  var TEXT_KEYS = ["text", "message", "output", "error", "summary"];
  function payloadText(payload) {
    if (payload == null) return "";
    if (typeof payload === "string") return payload;
    if (typeof payload !== "object") return String(payload);
    if (typeof payload.command === "string" && payload.command) {
      return payload.command + (typeof payload.message === "string" && payload.message ? ": " + payload.message : "");
    }
    for (var i = 0; i < TEXT_KEYS.length; i++) {
      if (typeof payload[TEXT_KEYS[i]] === "string" && payload[TEXT_KEYS[i]]) {
        return payload[TEXT_KEYS[i]];
      }
    }
    return summaryText(payload);
  }

  /* The words of a run's summary turn (the `log` a run ends its session with: runId, status,
     model, durationMs): "run ok · test-model · 1.2 s", "run stopped"; "" for any other payload. */
  function summaryText(p) {
    if (typeof p.runId !== "string" || typeof p.status !== "string") return "";
    var parts = ["run " + statusWord(p.status, p.finishReason)];
    if (typeof p.model === "string" && p.model) parts.push(p.model);
    if (typeof p.durationMs === "number") parts.push(p.durationMs >= 1000 ? (p.durationMs / 1000).toFixed(1) + " s" : p.durationMs + " ms");
    return parts.join(" · ");
  }

  /* The readable text of a stored payload's preview (the API's first 240 bytes of its JSON text,
     possibly cut): the payload's text when it parses; from a cut one, the first text field that
     survived; else "" — never the JSON itself. */
  function previewText(preview) {
    if (!preview) return "";
    var trimmed = String(preview).trim();
    if (trimmed.charAt(0) !== "{" && trimmed.charAt(0) !== "[" && trimmed.charAt(0) !== '"') return trimmed;
    try { return payloadText(JSON.parse(trimmed)); } catch (e) { /* cut mid-way */ }
    var cutSummary = /"runId"\s*:\s*"/.test(trimmed) && /"status"\s*:\s*"([a-z]+)"/.exec(trimmed);
    if (cutSummary && !/"(text|message|output|summary)"\s*:\s*"[^"]/.test(trimmed) && !/"error"\s*:\s*"[^"]/.test(trimmed)) {
      return summaryText({ runId: "", status: cutSummary[1], finishReason: (/"finishReason"\s*:\s*"([a-z_]+)"/.exec(trimmed) || [])[1] });
    }
    var keys = ["command"].concat(TEXT_KEYS);
    for (var i = 0; i < keys.length; i++) {
      var m = new RegExp('"' + keys[i] + '"\\s*:\\s*"((?:[^"\\\\]|\\\\.)*)').exec(trimmed);
      if (m && m[1]) {
        try { return JSON.parse('"' + m[1] + '"'); } catch (e) { return m[1].replace(/\\(.)/g, "$1"); }
      }
    }
    return "";
  }

  /* The data of a payload on demand: a closed <details> "Show the data" with it as indented JSON. */
  function dataDetails(value) {
    return el("details", { class: "data" }, [el("summary", { text: "Show the data" }), jsonBlock(value)]);
  }

  /* Who spoke a turn: a message's role (user, assistant, tool, system), a tool call's "tool",
     else the event's kind (log, control, status…). */
  function speaker(ev) {
    var p = ev.payload;
    if (ev.kind === (vocab.word || {}).toolCall) return "tool";
    if (p && typeof p === "object" && typeof p.role === "string" && p.role) return p.role;
    return ev.kind || "";
  }

  /* A JSON value rendered readably: indented, in a <pre>. */
  function jsonBlock(value, cls) {
    var text;
    try { text = typeof value === "string" ? value : JSON.stringify(value, null, 2); } catch (e) { text = String(value); }
    return el("pre", { class: "json" + (cls ? " " + cls : ""), text: text });
  }

  /* The body of one turn: a message's text; a tool call as a card (name, arguments, result or
     error); a command with its message; any other payload as its text or indented JSON. */
  function turnBody(ev) {
    var p = ev.payload;
    if (ev.kind === (vocab.word || {}).toolCall && p && typeof p === "object") {
      var args = p.arguments !== undefined ? p.arguments : p.args;
      var outcome = p.error === true ? p.result : (typeof p.error === "string" ? p.error : p.result);
      return el("div", { class: "tool-card" + (p.error ? " failed" : "") }, [
        el("div", { class: "tool-name" }, [el("code", { text: p.name || "tool" }), p.error ? el("span", { class: "err", text: " failed" }) : null]),
        args !== undefined ? el("div", { class: "tool-part" }, [el("span", { class: "muted small", text: "arguments" }), jsonBlock(args)]) : null,
        outcome !== undefined ? el("div", { class: "tool-part" }, [el("span", { class: "muted small", text: p.error ? "error" : "result" }), jsonBlock(outcome)]) : null
      ]);
    }
    if (ev.kind === (vocab.word || {}).commit && p && typeof p === "object" && typeof p.commit === "string") {
      // A commit: its subject, sha and the turn that made it, the diffstat, and the diff on demand.
      return el("div", { class: "commit card", "data-commit": p.commit }, [
        el("div", {}, [el("strong", { class: "commit-subject", text: p.subject || p.text || "" })]),
        el("div", { class: "muted small" }, ["commit ", el("code", { text: p.commit }), typeof p.turn === "number" ? " · turn #" + p.turn : ""]),
        p.diffstat ? el("pre", { class: "pre diffstat", text: p.diffstat }) : null,
        p.patch ? el("details", {}, [el("summary", { text: "Diff" }), el("pre", { class: "pre diff", text: p.patch })]) : null
      ]);
    }
    if (p && typeof p === "object") {
      // Words first (a message's text, a log's summary…), the whole payload behind "Show the data"
      // when it holds more than the words shown.
      var text = payloadText(p);
      var more = Array.isArray(p) || Object.keys(p).some(function (k) { return k !== "role" && p[k] !== text && p[k] !== "" && p[k] != null; });
      return el("div", {}, [
        text ? el("div", { class: "text", text: text }) : null,
        more ? dataDetails(p) : null
      ]);
    }
    return el("div", { class: "text", text: payloadText(p) });
  }

  /* One <li> of an event log, as a conversation turn: seq, who spoke (with the kind when it is
     not a message), the actor, and the body. */
  function eventItem(ev, fresh) {
    var who = speaker(ev);
    var li = el("li", { class: (ev.kind || "") + " speaker-" + who + (fresh ? " fresh" : ""), "data-seq": String(ev.seq), "data-kind": ev.kind || "", "data-speaker": who }, [
      el("span", { class: "seq", text: "#" + ev.seq }),
      el("span", { class: "who" }, [el("span", { class: "chip", text: who })]),
      el("div", { class: "body" }, [
        ev.actor && who !== "assistant" && who !== "tool" ? el("div", { class: "muted small actor", text: ev.actor }) : null,
        turnBody(ev)
      ])
    ]);
    li.title = fmtTime(ev.createdAt) + (ev.createdAt ? " (" + ev.createdAt + ")" : "");
    return li;
  }

  function isTerminal(status) { return (vocab.sessionTerminal || []).indexOf(status) >= 0; }

  /* Wrap every `.table` under `root` in a `.table-scroll` box: a wide table scrolls inside it,
     never the page (a phone is 390 px wide). The box is focusable, so keyboards scroll it too. */
  function scrollTables(root) {
    (root || document).querySelectorAll("table.table").forEach(function (table) {
      if (table.parentNode.classList && table.parentNode.classList.contains("table-scroll")) return;
      var box = el("div", { class: "table-scroll", tabindex: "0" });
      table.parentNode.insertBefore(box, table);
      box.appendChild(table);
    });
  }

  document.documentElement.classList.add("js");  // phones fold the navigation behind "Menu" only when this script runs

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("menu-toggle"), nav = document.getElementById("console-nav");
    if (toggle && nav) {
      toggle.addEventListener("click", function () {
        var open = nav.classList.toggle("open");
        toggle.setAttribute("aria-expanded", String(open));
      });
    }
    scrollTables(document);
    localizeTimes(document);
    // Forms show every error at once (a list at the top, each under its field); an error goes away
    // as soon as its field changes, so no stale error stays under a fixed field.
    document.querySelectorAll("form [aria-invalid=true]").forEach(function (input) {
      function clear() {
        var note = document.getElementById(input.getAttribute("aria-describedby") || "");
        if (note) note.hidden = true;
        input.removeAttribute("aria-invalid");
        document.querySelectorAll('.error-list li[data-field="' + input.name + '"]').forEach(function (li) { li.classList.add("fixed"); });
        input.removeEventListener("input", clear);
        input.removeEventListener("change", clear);
      }
      input.addEventListener("input", clear);
      input.addEventListener("change", clear);
    });
    document.querySelectorAll("form[data-autosubmit] select").forEach(function (s) {
      s.addEventListener("change", function () { s.form.submit(); });
    });
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (e) { if (!window.confirm(f.getAttribute("data-confirm"))) e.preventDefault(); });
    });
    document.querySelectorAll("[data-copy]").forEach(function (b) {
      b.addEventListener("click", function () {
        var src = document.querySelector(b.getAttribute("data-copy"));
        if (!src) return;
        var text = src.textContent.trim();
        (navigator.clipboard ? navigator.clipboard.writeText(text) : Promise.reject()).then(
          function () { b.textContent = "Copied"; },
          function () { var r = document.createRange(); r.selectNodeContents(src); var s = window.getSelection(); s.removeAllRanges(); s.addRange(r); b.textContent = "Selected — press Ctrl+C"; }
        );
      });
    });
  });

  window.Agents = { vocab: vocab, api: api, errorText: errorText, el: el, badge: badge, statusWord: statusWord, mayAnswer: mayAnswer, mayShare: mayShare, myActor: myActor, fmtTime: fmtTime, timeEl: timeEl, localizeTimes: localizeTimes, plural: plural,
    showError: showError, payloadText: payloadText, previewText: previewText, dataDetails: dataDetails, scrollTables: scrollTables, eventItem: eventItem, jsonBlock: jsonBlock, isTerminal: isTerminal, csrfToken: csrfToken, refocus: refocus };
})();
