// The campaign page's websocket glue (htmx's ws extension connects and reconnects). Each ping from the server
// names what changed (data-refresh); the progress fragment is re-fetched at most every REFRESH_MS.
(function () {
  "use strict";
  var REFRESH_MS = 1000;
  var dirty = false;

  document.addEventListener("htmx:wsAfterMessage", function (event) {
    if (/data-refresh="[^"]*progress/.test(event.detail.message)) { dirty = true; }
  });

  function status(text) {
    var label = document.querySelector("[data-campaign-stream-status]");
    if (label) { label.textContent = text; }
  }
  document.addEventListener("htmx:wsOpen", function () { status("live"); });
  document.addEventListener("htmx:wsClose", function (event) {
    status(event.detail.event.code === 4403 ? "not allowed to watch this campaign" : "disconnected, reconnecting…");
  });

  window.setInterval(function () {
    if (dirty) {
      dirty = false;
      htmx.trigger(document.body, "campaign-refresh");
    }
  }, REFRESH_MS);
})();
