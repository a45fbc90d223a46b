/* The agent form's tool picker: ticking a tool adds its name to the Tools field, unticking
   removes it; the boxes follow what is typed. The field stays the one the server reads. */
(function () {
  "use strict";
  var field = document.getElementById("id_tools");
  var picker = document.getElementById("tool-picker");
  if (!field || !picker) return;
  var boxes = picker.querySelectorAll("input[data-tool]");

  function names() { return field.value.split(/[,\n]/).map(function (s) { return s.trim(); }).filter(Boolean); }

  function sync() {
    var have = names();
    boxes.forEach(function (b) { b.checked = have.indexOf(b.dataset.tool) >= 0; });
  }

  boxes.forEach(function (b) {
    b.addEventListener("change", function () {
      var have = names().filter(function (n) { return n !== b.dataset.tool; });
      if (b.checked) have.push(b.dataset.tool);
      field.value = have.join("\n");
    });
  });
  field.addEventListener("input", sync);
  sync();
})();

/* Every error is shown at once (the list at the top, each under its field); an error under a
   field goes away as soon as that field is changed, so no stale error stays under a fixed field. */
(function () {
  "use strict";
  document.querySelectorAll("#agent-form [aria-invalid=true]").forEach(function (input) {
    function clear() {
      var note = document.getElementById(input.getAttribute("aria-describedby") || "");
      if (note) note.hidden = true;
      input.removeAttribute("aria-invalid");
      var item = document.querySelector('#form-error li[data-field="' + input.name + '"]');
      if (item) item.classList.add("fixed");
      input.removeEventListener("input", clear);
      input.removeEventListener("change", clear);
    }
    input.addEventListener("input", clear);
    input.addEventListener("change", clear);
  });
})();
