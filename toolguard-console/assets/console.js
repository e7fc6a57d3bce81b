// Counts down every "expires in" cell once a second. No inline script: the console's CSP
// allows scripts from its own origin only.
"use strict";
(function () {
  function words(secs) {
    if (secs <= 0) return "expired";
    if (secs >= 3600) return Math.floor(secs / 3600) + " h " + String(Math.floor(secs % 3600 / 60)).padStart(2, "0") + " min";
    if (secs >= 60) return Math.floor(secs / 60) + " min " + String(secs % 60).padStart(2, "0") + " s";
    return secs + " s";
  }
  function tick() {
    document.querySelectorAll("[data-expires-at-ms]").forEach(function (el) {
      var left = Math.floor((Number(el.dataset.expiresAtMs) - Date.now()) / 1000);
      el.textContent = words(left);
      el.classList.toggle("soon", left < 300);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 1000); });
})();
