// The reader's time zone, from the first visit: every page, email and PDF shows times in it.
// Runs before the page is drawn. With no "tz" cookie yet the server drew this page in UTC
// (labelled); once the cookie is set, a plain GET page is loaded once more in the right
// zone. Without JavaScript the pages stay in UTC and say so.
(function () {
  "use strict";
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (!tz || !/^[A-Za-z0-9_+\-\/]+$/.test(tz)) return;
    var m = document.cookie.match(/(?:^|;\s*)tz=([^;]*)/);
    if (m && m[1] === tz) return;
    // Stored as is ("Asia/Shanghai": "/" is a valid cookie character); refreshed when the
    // browser's zone changes (travel) or an older page stored it URL-encoded.
    document.cookie = "tz=" + tz + ";path=/;max-age=31536000;samesite=lax";
    var me = document.currentScript;
    var stored = (document.cookie.match(/(?:^|;\s*)tz=([^;]*)/) || [])[1] === tz;
    if (!m && stored && tz !== "UTC" && me && me.getAttribute("data-reload") === "1") {
      location.replace(location.href);
    }
  } catch (err) { /* no zone: UTC, labelled */ }
})();
