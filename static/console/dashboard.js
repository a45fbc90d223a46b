/* The dashboard: the invocations chart (GET /v1/agents/metrics?range=24h|7d|30d, drawn as
   inline SVG, one stacked colour per agent) and the activity feed (GET /v1/agents/activity). */
(function () {
  "use strict";
  var A = window.Agents;
  var chart = document.getElementById("chart");
  var feed = document.getElementById("activity");
  if (!chart) return;
  var SVG = "http://www.w3.org/2000/svg";
  var PALETTE = ["#4f46e5", "#0891b2", "#16a34a", "#d97706", "#db2777", "#7c3aed", "#0d9488", "#dc2626"];

  function svg(tag, attrs) {
    var n = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    return n;
  }

  var WINDOW = { "24h": "in the last 24 hours", "7d": "in the last 7 days", "30d": "in the last 30 days" };

  /* A bucket is named by the time it ends: the newest one, [now − 1 h, now), reads "now"'s hour, not an hour ago. */
  function label(t, range) {
    var d = new Date(new Date(t).getTime() + (range === "24h" ? 3600e3 : 86400e3));
    if (isNaN(d)) return t;
    return range === "24h" ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : d.toLocaleDateString([], { month: "short", day: "numeric" });
  }

  /* Whole-number ticks from 0 to at least `top`, at a round step (1, 2, 5 × 10^k), 3 to 6 of them. */
  function yTicks(top) {
    var raw = Math.max(top, 1) / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag;
    [1, 2, 5, 10].some(function (m) { step = Math.max(1, m * mag); return m * mag >= raw; });
    step = Math.max(1, Math.round(step));
    var ticks = [];
    for (var v = 0; v < top + step; v += step) { ticks.push(v); if (v >= top) break; }
    return ticks;
  }

  function draw(data) {
    chart.innerHTML = "";
    var series = data.series || [];
    if (!series.length) {
      chart.appendChild(A.el("p", { class: "muted", id: "chart-empty", text: "No runs in this range yet — run an agent and its invocations are counted here." }));
      return;
    }
    // Drawn at the box's own width (one SVG unit = one CSS pixel), so the axis numbers and labels
    // stay 11 px on a phone instead of shrinking with a fixed 760-unit drawing.
    var n = series[0].points.length, W = Math.max(Math.round(chart.clientWidth) || 760, 240), H = 200, pad = 36, bw = (W - pad) / n;
    var totals = [];
    for (var i = 0; i < n; i++) totals.push(series.reduce(function (s, x) { return s + (x.points[i] ? x.points[i].v : 0); }, 0));
    var ticks = yTicks(Math.max.apply(null, totals.concat([1])));
    var max = ticks[ticks.length - 1];
    var root = svg("svg", { viewBox: "0 0 " + W + " " + (H + 22), height: H + 22, role: "img", "aria-label": "Runs per bucket", "data-total": String(totals.reduce(function (a, b) { return a + b; }, 0)) });
    // The y-axis: whole-number ticks at round steps, a gridline each, and what is counted.
    var axis = svg("g", { class: "y-axis", "data-ticks": ticks.join(",") });
    ticks.forEach(function (v) {
      var y = H - (v / max) * (H - 16);
      axis.appendChild(svg("line", { x1: pad, y1: y, x2: W, y2: y, stroke: v === 0 ? "#cbd5e1" : "#f1f5f9" }));
      var t = svg("text", { x: pad - 4, y: y + 4, "font-size": 11, fill: "#6b7280", "text-anchor": "end" });
      t.textContent = String(v);
      axis.appendChild(t);
    });
    var unit = svg("text", { x: pad + 4, y: 10, "font-size": 11, fill: "#6b7280" }); unit.textContent = "runs";
    axis.appendChild(unit);
    root.appendChild(axis);
    for (var b = 0; b < n; b++) {
      var y = H;
      series.forEach(function (s, si) {
        var v = s.points[b] ? s.points[b].v : 0;
        if (!v) return;
        var h = (v / max) * (H - 16);
        y -= h;
        var r = svg("rect", { x: pad + b * bw + 1, y: y, width: Math.max(bw - 2, 1), height: h, fill: PALETTE[si % PALETTE.length], rx: 2 });
        var tip = svg("title", {}); tip.textContent = s.key + ": " + v + " up to " + label(s.points[b].t, data.range); r.appendChild(tip);
        root.appendChild(r);
      });
    }
    [[0, "start"], [Math.floor(n / 2), "middle"], [n - 1, "end"]].forEach(function (at) {
      var i = at[0];
      var t = svg("text", { x: at[1] === "end" ? W : at[1] === "middle" ? pad + (i + 0.5) * bw : pad + i * bw, y: H + 16, "font-size": 11, fill: "#6b7280", "text-anchor": at[1] });
      t.textContent = label(series[0].points[i].t, data.range);
      root.appendChild(t);
    });
    chart.appendChild(root);
    var legend = A.el("div", { class: "legend" });
    series.forEach(function (s, si) {
      var sum = s.points.reduce(function (a, p) { return a + p.v; }, 0);
      var sw = A.el("i"); sw.style.background = PALETTE[si % PALETTE.length];
      legend.appendChild(A.el("span", { "data-series": s.key }, [sw, s.key + " (" + sum + ")"]));
    });
    var inWindow = totals.reduce(function (a, b) { return a + b; }, 0);
    legend.appendChild(A.el("span", { class: "muted", id: "chart-total", text: A.plural(inWindow, "run") + " " + (WINDOW[data.range] || "in this range") }));
    chart.appendChild(legend);
  }

  function load(range) {
    document.querySelectorAll("[data-range]").forEach(function (b) { b.classList.toggle("on", b.dataset.range === range); });
    chart.innerHTML = '<p class="muted">Loading…</p>';
    A.api("GET", "/v1/agents/metrics?range=" + encodeURIComponent(range)).then(function (res) {
      if (!res.ok || !res.body) { chart.innerHTML = ""; chart.appendChild(A.el("div", { class: "alert error", role: "alert", text: "Could not load the chart: " + A.errorText(res) })); return; }
      drawn = res.body;
      draw(res.body);
    });
  }

  function loadActivity() {
    A.api("GET", "/v1/agents/activity").then(function (res) {
      feed.innerHTML = "";
      if (!res.ok || !res.body) { feed.appendChild(A.el("li", { class: "err", role: "alert", text: "Could not load the activity feed: " + A.errorText(res) })); return; }
      var rows = res.body.activity || [];
      if (!rows.length) { feed.appendChild(A.el("li", { class: "muted", text: "No activity yet — create an agent and run it." })); return; }
      rows.forEach(function (r) {
        // A run a user stopped is a `failed` row with finishReason `stopped`: shown "stopped" (grey), not a red failure.
        var stopped = A.statusWord(r.kind, r.finishReason) !== r.kind;
        feed.appendChild(A.el("li", { "data-kind": r.kind, "data-finish": r.finishReason || "" }, [A.badge(A.statusWord(r.kind, r.finishReason)),
          A.el("strong", { text: r.agent || "" }), A.el("span", { class: stopped ? "muted" : "", text: r.message || "" }), A.timeEl(r.at)]));
      });
    });
  }

  document.querySelectorAll("[data-range]").forEach(function (b) { b.addEventListener("click", function () { load(b.dataset.range); }); });
  var drawn = null, resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () { if (drawn) draw(drawn); }, 150);
  });
  load("24h");
  loadActivity();
})();
