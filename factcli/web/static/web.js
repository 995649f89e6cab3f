// factcli view --web: the little JavaScript the pages use. Everything works without it (filters
// and ratings are plain forms); with it, a run in progress refreshes itself as rows finish, the
// filter form applies on change, and the rater's name is remembered in this browser.
(function () {
  "use strict";

  // A run still writing: poll its small status document every 2 s and, when rows were added,
  // swap in the page's live region (counts, columns, matrix) fetched afresh; stop once it ends.
  var body = document.body;
  var statusUrl = body.getAttribute("data-live");
  if (statusUrl) {
    var rows = Number(body.getAttribute("data-rows"));
    var poll = function () {
      fetch(statusUrl, {headers: {"Accept": "application/json"}}).then(function (r) { return r.json(); })
        .then(function (s) {
          var running = s.status === "running";
          if (s.rows !== rows || !running) {
            rows = s.rows;
            return fetch(location.href).then(function (r) { return r.text(); }).then(function (html) {
              var doc = new DOMParser().parseFromString(html, "text/html");
              var fresh = doc.getElementById("live-region");
              var here = document.getElementById("live-region");
              if (fresh && here) { here.replaceWith(fresh); }
              return running;
            });
          }
          return running;
        })
        .then(function (running) { if (running) { setTimeout(poll, 2000); } })
        .catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, 2000);
  }

  // Filters: a checkbox or a select applies at once (the Apply button does the same without JS).
  document.addEventListener("change", function (e) {
    var form = e.target.form;
    if (form && form.id === "filters" && e.target.type !== "search") { form.submit(); }
  });

  // Ratings: remember who rates, so a person types their name once.
  var rater = document.getElementById("rate-rater");
  if (rater && window.localStorage) {
    rater.value = rater.value || localStorage.getItem("factcli-rater") || "";
    var form = document.getElementById("rate-form");
    if (form) { form.addEventListener("submit", function () { localStorage.setItem("factcli-rater", rater.value); }); }
  }

  // Compare: exactly two runs ticked.
  var compare = document.getElementById("compare-form");
  if (compare) {
    compare.addEventListener("submit", function (e) {
      var ticked = compare.querySelectorAll("input[name=run]:checked").length;
      if (ticked !== 2) { e.preventDefault(); alert("Tick two runs to compare (" + ticked + " ticked)."); }
    });
  }
})();
