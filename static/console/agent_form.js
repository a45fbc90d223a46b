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

