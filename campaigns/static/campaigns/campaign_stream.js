// The campaign page's websocket glue (htmx's ws extension connects and reconnects). Each ping from the server
// names what changed (data-refresh); the progress fragment is re-fetched at most every REFRESH_MS. Once the
// fragment says the campaign is done (data-done), the page stops saying "Live" (a reload connects no socket).
(function () {
  "use strict";
  var REFRESH_MS = 1000;
  var dirty = false;
  var done = false;

  document.addEventListener("htmx:afterSwap", function () {
    var progress = document.querySelector("[data-campaign] [data-done]");
    var line = document.querySelector("[data-campaign-live]");
    if (done || !progress || !progress.dataset.done || !line) { return; }
    done = true;
    var when = progress.dataset.done;
    line.textContent = when.charAt(0).toUpperCase() + when.slice(1) + "; this page no longer updates.";
  });

  document.addEventListener("htmx:wsAfterMessage", function (event) {
    if (/data-refresh="[^"]*progress/.test(event.detail.message)) { dirty = true; }
  });

  function status(text) {
    if (done) { return; }
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
