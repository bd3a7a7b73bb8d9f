// The checkout return page while the provider's webhook is awaited.
//
// A timed <meta http-equiv="refresh"> would do this without JavaScript, but it reloads the
// page under a screen reader every few seconds (WCAG 2.2.1; axe-core's "meta-refresh" is
// a critical finding). Instead the page is fetched again quietly every few seconds and
// reloaded once, when the order's status has changed. Without JavaScript the page's
// "Check again now" link does the same by hand.
(function () {
  "use strict";
  var box = document.getElementById("order-status");
  if (!box || box.getAttribute("data-status") !== "pending" || !window.fetch) {
    return;
  }
  var seconds = parseInt(box.getAttribute("data-poll-seconds"), 10) || 5;
  var triesLeft = Math.ceil(600 / seconds); // ten minutes, then the link is enough

  function statusIn(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var next = doc.getElementById("order-status");
    return next ? next.getAttribute("data-status") : null;
  }

  function check() {
    triesLeft -= 1;
    window
      .fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        return response.ok ? response.text() : "";
      })
      .then(function (html) {
        var status = html ? statusIn(html) : null;
        if (status && status !== "pending") {
          window.location.reload();
        } else if (triesLeft > 0) {
          window.setTimeout(check, seconds * 1000);
        }
      })
      .catch(function () {
        if (triesLeft > 0) {
          window.setTimeout(check, seconds * 2000);
        }
      });
  }

  window.setTimeout(check, seconds * 1000);
})();
