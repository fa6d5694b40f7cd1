// The page's only script: details on click, flows on and off, highlight by name. It reads
// names from the SVG's <title> elements (text the page escaped) and writes them back only
// as text, never as markup.
(function () {
  "use strict";
  var svg = document.getElementById("tl");
  var detail = document.getElementById("detail");
  var marks = svg.querySelectorAll(".s, .i");
  svg.addEventListener("click", function (e) {
    var el = e.target;
    var title = el && el.querySelector ? el.querySelector("title") : null;
    if (title) {
      detail.textContent = title.textContent;
    }
  });
  document.getElementById("flows").addEventListener("change", function (e) {
    svg.classList.toggle("noflows", !e.target.checked);
  });
  document.getElementById("find").addEventListener("input", function (e) {
    var q = e.target.value.toLowerCase();
    svg.classList.toggle("dim", q !== "");
    for (var i = 0; i < marks.length; i++) {
      var t = marks[i].querySelector("title");
      var hit = q !== "" && t !== null && t.textContent.toLowerCase().indexOf(q) >= 0;
      marks[i].classList.toggle("hl", hit);
    }
  });
  document.documentElement.setAttribute("data-ready", String(marks.length));
})();
