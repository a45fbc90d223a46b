/* The Agent keys page: lock/unlock the local keystore, list what it holds (public halves only),
   back it up (Passkey PRF, or a password) and restore it on a new browser. All crypto is in
   window.Keystore; the page only draws. */
(function () {
  "use strict";
  var A = window.Agents, KS = window.Keystore;
  var box = document.getElementById("keystore");
  if (!box) return;
  var stateBadge = document.getElementById("keystore-state");
  var message = document.getElementById("keystore-message");
  var errorBox = document.getElementById("keystore-error");
  var unlockForm = document.getElementById("keystore-unlock");
  var createForm = document.getElementById("keystore-create");
  var openPanel = document.getElementById("keystore-open");
  var tbody = document.querySelector("#keystore-agents tbody");

  function fail(err) {
    errorBox.textContent = err instanceof KS.WrongPassword ? "Wrong password: the keystore stays locked." : String((err && err.message) || err);
    errorBox.hidden = false;
  }

  function draw() {
    return KS.status().then(function (s) {
      box.dataset.state = s;
      stateBadge.textContent = s;
      unlockForm.hidden = s !== "locked";
      createForm.hidden = s !== "none";
      openPanel.hidden = s !== "unlocked";
      tbody.innerHTML = "";
      KS.agents().forEach(function (a) {
        tbody.appendChild(A.el("tr", { "data-agent": a.agent_id }, [A.el("td", { text: a.display_name || "" }), A.el("td", {}, [A.el("code", { class: "small", text: a.agent_id })]),
          A.el("td", {}, [A.el("code", { class: "small", text: a.x25519.publicKey })]), A.el("td", {}, [A.el("code", { class: "small", text: a.ed25519.publicKey })]),
          A.el("td", {}, [A.timeEl(a.saved_at)])]));
      });
      if (s === "unlocked" && !KS.agents().length) tbody.appendChild(A.el("tr", {}, [A.el("td", { colspan: "5", class: "muted", text: "No agent keys yet." })]));
    });
  }

  function busy(promise, done) {
    errorBox.hidden = true;
    message.textContent = "Working…";
    return promise.then(function (value) { message.textContent = done(value) || ""; return draw(); }, function (err) { message.textContent = ""; fail(err); return draw(); });
  }

  unlockForm.addEventListener("submit", function (e) {
    e.preventDefault();
    busy(KS.unlock(unlockForm.elements.password.value), function () { unlockForm.reset(); return "Unlocked."; });
  });
  createForm.addEventListener("submit", function (e) {
    e.preventDefault();
    busy(KS.create(createForm.elements.password.value), function () { createForm.reset(); return "Keystore created."; });
  });
  document.getElementById("keystore-lock").addEventListener("click", function () { KS.lock(); message.textContent = "Locked."; draw(); });
  document.getElementById("backup-passkey").addEventListener("click", function () {
    busy(KS.backupWithPasskey(), function (r) { return "✓ Backed up with your Passkey (" + r.size_bytes + " bytes, encrypted)."; });
  });
  var backupForm = document.getElementById("backup-password");
  backupForm.addEventListener("submit", function (e) {
    e.preventDefault();
    busy(KS.backupWithPassword(backupForm.elements.password.value), function (r) { backupForm.reset(); return "✓ Backed up with the password (" + r.size_bytes + " bytes, encrypted)."; });
  });
  var restoreForm = document.getElementById("restore-form");
  restoreForm.addEventListener("submit", function (e) {
    e.preventDefault();
    busy(KS.restore(restoreForm.elements.new_password.value, restoreForm.elements.backup_password.value), function (bundle) {
      restoreForm.reset();
      return "✓ Restored " + A.plural(Object.keys(bundle.agents || {}).length, "identity agent key set") + ".";
    });
  });
  draw();
})();
