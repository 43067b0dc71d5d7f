(function () {
  "use strict";
  var doc = document;
  function all(selector, root) { return Array.prototype.slice.call((root || doc).querySelectorAll(selector)); }
  function el(tag, attrs, text) {
    var node = doc.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  // verdict summary: how many of each verdict the page shows; a click filters the claims
  var summary = doc.getElementById("verdict-summary");
  if (summary) {
    var counted = all("[data-count-verdict]");
    var order = JSON.parse(summary.getAttribute("data-verdicts"));
    var counts = {};
    counted.forEach(function (node) {
      var v = node.getAttribute("data-count-verdict");
      counts[v] = (counts[v] || 0) + 1;
    });
    var filter = null;
    order.forEach(function (verdict) {
      if (!counts[verdict]) { return; }
      var item = el("li", {"data-verdict": verdict, "class": "verdict-count"});
      item.appendChild(el("span", {"class": "verdict verdict-" + verdict.replace(/ /g, "_")},
                          verdict.replace(/_/g, " ") + ": " + counts[verdict]));
      item.addEventListener("click", function () {
        filter = filter === verdict ? null : verdict;
        all("#verdict-summary li").forEach(function (li) {
          li.classList.toggle("on", li.getAttribute("data-verdict") === filter);
        });
        all("[data-filter-verdict]").forEach(function (row) {
          var hide = filter !== null && row.getAttribute("data-filter-verdict") !== filter;
          row.classList.toggle("hidden", hide);
        });
      });
      summary.appendChild(item);
    });
    summary.setAttribute("data-total", String(counted.length));
  }

  // tool ids: each tool_use learns how many tool_result blocks of its probe answer it;
  // pointing at an id marks every element of the probe with the same id
  all("section.probe, section.page-scope").forEach(function (scope) {
    var results = {};
    all("[data-tool-result-id]", scope).forEach(function (node) {
      var id = node.getAttribute("data-tool-result-id");
      results[id] = (results[id] || 0) + 1;
    });
    all("[data-tool-use]", scope).forEach(function (node) {
      var id = node.getAttribute("data-tool-use-id");
      node.setAttribute("data-results", String(results[id] || 0));
      node.title = (results[id] || 0) + " tool_result block(s) in this probe answer " + id;
    });
    scope.addEventListener("mouseover", function (event) {
      var target = event.target.closest ? event.target.closest("[data-tool-use-id]") : null;
      all(".active", scope).forEach(function (n) { n.classList.remove("active"); });
      if (!target) { return; }
      var id = target.getAttribute("data-tool-use-id");
      all("[data-tool-use-id]", scope).forEach(function (n) {
        if (n.getAttribute("data-tool-use-id") === id) { n.classList.add("active"); }
      });
    });
  });

  // timeline axes: ticks in ms along each probe's one time axis
  all(".timeline[data-total-ms]").forEach(function (line) {
    var total = parseFloat(line.getAttribute("data-total-ms"));
    var axis = el("div", {"class": "tl-axis"});
    var step = Math.pow(10, Math.floor(Math.log10(Math.max(total, 1) / 4)));
    [1, 2, 5, 10].some(function (m) { if (total / (step * m) <= 8) { step = step * m; return true; } return false; });
    for (var t = 0; t <= total; t += step) {
      var tick = el("span", {"class": "tl-tick", "style": "left:" + (100 * t / total) + "%"},
                    t >= 1000 ? (t / 1000) + " s" : t + " ms");
      axis.appendChild(tick);
    }
    line.appendChild(axis);
    line.setAttribute("data-axis", "built");
  });

  // the almanac: filter the claims by area and by change; #area=NAME preselects an area
  var almanac = doc.getElementById("almanac");
  if (almanac) {
    var area = doc.getElementById("area-filter");
    var changed = doc.getElementById("changed-only");
    var shown = doc.getElementById("shown-count");
    var wanted = /^#area=(.*)$/.exec(doc.location.hash);
    if (wanted) { area.value = decodeURIComponent(wanted[1]); }
    var apply = function () {
      var count = 0;
      all("section.almanac-claim").forEach(function (section) {
        var hide = (area.value && section.getAttribute("data-area") !== area.value) ||
          (changed.checked && section.getAttribute("data-changes") === "0");
        if (hide) { section.setAttribute("hidden", ""); } else { section.removeAttribute("hidden"); count += 1; }
      });
      shown.textContent = count + " claim(s) shown";
      shown.setAttribute("data-shown", String(count));
    };
    area.addEventListener("change", apply);
    changed.addEventListener("change", apply);
    apply();

    // a change's "why" (its <details>, which works without this) shown in the side panel:
    // on a click on the change's summary or its mark on the bar, or a #change-... address.
    // The panel gets a copy of the page's own (escaped) nodes, never text parsed as HTML.
    var panel = doc.getElementById("why-panel");
    var content = doc.getElementById("why-content");
    var show = function (change) {
      var body = change ? change.querySelector(".why-body") : null;
      if (!body) { return; }
      while (content.firstChild) { content.removeChild(content.firstChild); }
      content.appendChild(body.cloneNode(true));
      panel.removeAttribute("hidden");
      panel.setAttribute("data-change", change.id);
    };
    var fromHash = function () {
      var wanted = /^#(change-.*)$/.exec(doc.location.hash);
      if (wanted) { show(doc.getElementById(decodeURIComponent(wanted[1]))); }
    };
    almanac.addEventListener("click", function (event) {
      var summary = event.target.closest ? event.target.closest("summary.why-summary") : null;
      if (summary) { show(summary.closest("li.change")); }
    });
    doc.getElementById("why-close").addEventListener("click", function () {
      panel.setAttribute("hidden", "");
      panel.removeAttribute("data-change");
    });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  doc.body.setAttribute("data-js", "ready");
}());
