// Tayga's app script. Every page works without it; it only (1) shows times in the browser's
// zone (UTC stays on hover), (2) refreshes a live page's data, (3) shows a chart point's
// value at once on hover, (4) follows new lines on the Logs page.
(function () {
  "use strict";
  var zoned = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
    hour12: false, timeZoneName: "short"
  });

  // `2026-12-01 12:18:33 CET`: the same shape as the UTC text, in the browser's zone.
  function local(d) {
    var p = {};
    zoned.formatToParts(d).forEach(function (part) { p[part.type] = part.value; });
    var hour = p.hour === "24" ? "00" : p.hour;
    return p.year + "-" + p.month + "-" + p.day + " " + hour + ":" + p.minute + ":" + p.second + " " + (p.timeZoneName || "");
  }

  function localTimes(root) {
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      if (!el.title) el.title = el.textContent;
      el.textContent = local(d);
    }
  }

  function live() {
    var seconds = parseInt(document.body.getAttribute("data-refresh"), 10);
    var box = document.getElementById("live");
    if (!seconds || !box) return;
    box.hidden = false;
    box.checked = localStorage.getItem("tayga-live") === "on";
    box.addEventListener("change", function () {
      localStorage.setItem("tayga-live", box.checked ? "on" : "off");
    });
    setInterval(function () {
      if (!box.checked || document.hidden) return;
      fetch(location.href, { headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
          var main = document.querySelector("main");
          if (fresh && main) {
            main.innerHTML = fresh.innerHTML;
            localTimes(main);
          }
        })
        .catch(function () { /* the next tick tries again */ });
    }, seconds * 1000);
  }

  function tips() {
    var tip = document.createElement("div");
    tip.id = "tip";
    document.body.appendChild(tip);
    document.addEventListener("mouseover", function (e) {
      var t = e.target;
      var text = t && t.getAttribute && t.getAttribute("data-tip");
      if (!text) { tip.style.display = "none"; return; }
      tip.textContent = text;
      tip.style.display = "block";
      tip.style.left = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 8) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
  }

  // The Logs page's follow box: while ticked, fetch the page's own address (its range ends
  // now) and put the lines not shown yet on top, marked new; the chart is replaced whole.
  function follow() {
    var results = document.getElementById("log-results");
    var box = document.getElementById("follow");
    if (!results || !box) return;
    var seconds = parseInt(results.getAttribute("data-follow"), 10) || 2;
    var status = document.getElementById("live-status");
    setInterval(function () {
      if (!box.checked || document.hidden) return;
      fetch(location.href, { headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var chart = document.getElementById("count-chart");
          var freshChart = doc.getElementById("count-chart");
          if (chart && freshChart) chart.innerHTML = freshChart.innerHTML;
          var tbody = document.querySelector("#log-lines tbody");
          if (!tbody) {
            var table = doc.getElementById("log-lines");
            var empty = results.querySelector(".empty-chart");
            if (!table || !empty) return;
            empty.parentNode.replaceChild(document.importNode(table, true), empty);
            localTimes(results);
            if (status) status.textContent = "following";
            return;
          }
          var shown = {};
          tbody.querySelectorAll("tr[data-log-id]").forEach(function (tr) { shown[tr.getAttribute("data-log-id")] = true; });
          var fresh = doc.querySelectorAll("#log-lines tbody tr[data-log-id]");
          var added = [];
          for (var i = 0; i < fresh.length; i++) {
            if (!shown[fresh[i].getAttribute("data-log-id")]) added.push(fresh[i]);
          }
          for (var j = added.length - 1; j >= 0; j--) {
            var row = document.importNode(added[j], true);
            row.classList.add("new");
            tbody.insertBefore(row, tbody.firstChild);
            localTimes(row);
          }
          if (status) status.textContent = "following: " + added.length + " new at " + local(new Date());
        })
        .catch(function () { /* the next tick tries again */ });
    }, seconds * 1000);
  }

  localTimes(document);
  live();
  tips();
  follow();
})();
