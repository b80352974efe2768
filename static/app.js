// Small progressive enhancements; every page works without this file.
(function () {
  "use strict";
  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.getAttribute("content") : "";
  }
  // htmx requests carry the CSRF token as a header.
  document.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrf();
  });
  // Copy buttons: <button data-copy="#id">.
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("[data-copy]");
    if (!b) return;
    var el = document.querySelector(b.getAttribute("data-copy"));
    if (!el || !navigator.clipboard) return;
    navigator.clipboard.writeText(el.textContent.trim()).then(function () {
      var old = b.textContent;
      b.textContent = b.getAttribute("data-copied") || "Copied";
      setTimeout(function () { b.textContent = old; }, 1500);
    });
  });
  // Countdowns: <time data-countdown="ISO8601" data-expired="text">.
  function pad(n) { return n < 10 ? "0" + n : "" + n; }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var end = Date.parse(el.getAttribute("data-countdown"));
      var offset = parseInt(el.getAttribute("data-offset-ms") || "0", 10);
      var left = Math.max(0, end - (now + offset));
      if (left === 0) { el.textContent = el.getAttribute("data-expired") || "0:00"; return; }
      var s = Math.floor(left / 1000), d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
      var m = Math.floor((s % 3600) / 60), sec = s % 60;
      // Days in the page's language ("2d" / "2天"), from data-day="{n}d".
      var day = (el.getAttribute("data-day") || "{n}d").replace("{n}", d);
      el.textContent = (d ? day + " " : "") + (d || h ? h + ":" + pad(m) : m) + ":" + pad(sec);
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
  // The time zone cookie is set by tz.js (in <head>, before the page is drawn).
  // Auto-submit selects marked data-autosubmit (filters); the button stays for no-JS.
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.matches && t.matches("[data-autosubmit]") && t.form) t.form.requestSubmit();
  });
})();
