(function () {
  "use strict";
  var Z = parseFloat(document.body.getAttribute("data-z"));
  function wilson(k, n) {
    if (!n) { return [0, 1]; }
    var p = k / n, d = 1 + Z * Z / n, c = (p + Z * Z / (2 * n)) / d;
    var h = Z / d * Math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n));
    return [k === 0 ? 0 : Math.max(0, c - h), k === n ? 1 : Math.min(1, c + h)];
  }
  function pct(x) { return (100 * x).toFixed(1); }
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.qrow"));
  var views = parseInt(document.body.getAttribute("data-views"), 10);
  function keep(row, name, value) {
    if (value === "") { return true; }
    if (value === "disagree") { return row.dataset.correct0 !== row.dataset.correct1; }
    var cut = value.indexOf(":");
    if (cut < 0) { return row.dataset[name] === value; }
    return row.dataset[name + value.slice(0, cut)] === value.slice(cut + 1);
  }
  function apply() {
    var shown = rows.filter(function (row) {
      var ok = selects.every(function (s) { return keep(row, s.name, s.value); });
      row.hidden = !ok;
      return ok;
    });
    document.getElementById("shown-count").textContent = shown.length + " of " + rows.length + " questions";
    for (var i = 0; i < views; i++) {
      var out = document.getElementById("acc-" + i);
      if (!out) { continue; }
      var k = shown.filter(function (row) { return row.dataset["correct" + i] === "1"; }).length;
      var ci = wilson(k, shown.length);
      out.textContent = out.getAttribute("data-label") + ": " + k + "/" + shown.length + " = " +
        (shown.length ? pct(k / shown.length) : "-") + "% [" + pct(ci[0]) + ", " + pct(ci[1]) + "]";
    }
  }
  var params = new URLSearchParams(window.location.search);
  selects.forEach(function (s) {
    if (params.has(s.name)) { s.value = params.get(s.name); }
    s.addEventListener("change", apply);
  });
  apply();
}());
