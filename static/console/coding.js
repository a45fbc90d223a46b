/* The coding run page while the run works: re-read its changing part every second (commits as
   they are made, turns, status) and stop once the run has finished. */
(function () {
  "use strict";
  var box = document.getElementById("coding-live");
  if (!box) return;
  var url = box.dataset.liveUrl;
  function finished() {
    var part = box.querySelector(".live-part");
    return part && part.dataset.terminal === "true";
  }
  function poll() {
    if (finished()) return;
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) {
          var open = {};
          box.querySelectorAll("details[open]").forEach(function (d) { var c = d.closest("[data-commit]"); if (c) open[c.dataset.commit] = true; });
          box.innerHTML = html;
          window.Agents.localizeTimes(box);  // the swapped-in part keeps the one date format
          box.querySelectorAll("[data-commit]").forEach(function (c) { if (open[c.dataset.commit]) { var d = c.querySelector("details"); if (d) d.open = true; } });
        }
      })
      .catch(function () {})
      .then(function () { if (!finished()) window.setTimeout(poll, 1000); });
  }
  window.setTimeout(poll, 1000);
})();
