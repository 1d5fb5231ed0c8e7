// Sortable tables of the gpuchar report: click a header to sort by that column (numbers by
// their data-sort value, text otherwise); click again to reverse. No network, no library.
(function () {
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-sort");
    return v === null ? cell.textContent.trim().toLowerCase() : v;
  }
  function compare(a, b, numeric) {
    if (numeric) {
      if (a === "" && b === "") { return 0; }
      if (a === "") { return 1; }
      if (b === "") { return -1; }
      return parseFloat(a) - parseFloat(b);
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }
  function sortBy(table, index, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = th.getAttribute("data-type") === "num";
    var up = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (c) {
      c.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var r = compare(cellValue(a, index), cellValue(b, index), numeric);
      return up ? r : -r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var head = table.tHead && table.tHead.rows[0];
    if (!head) { return; }
    Array.prototype.forEach.call(head.cells, function (th, index) {
      th.addEventListener("click", function () { sortBy(table, index, th); });
    });
  });
})();
