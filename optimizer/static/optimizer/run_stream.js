// The run page's websocket glue (htmx's ws extension does the swapping). Three jobs htmx cannot do alone:
// 1. skip events already shown (data-seq <= last), so a reconnect never duplicates a line;
// 2. reconnect from the last seq seen (rewrite ?after= in the socket URL), so nothing is missed;
// 3. re-fetch the state panel / chart at most every REFRESH_MS when events say they changed.
(function () {
  "use strict";
  var REFRESH_MS = 400;
  var lastSeq = 0;
  var dirty = {};

  function firstMatch(pattern, text) {
    var match = pattern.exec(text);
    return match ? match[1] : null;
  }

  htmx.createWebSocket = function (url) {
    var socket = new WebSocket(url.replace(/([?&]after=)\d+/, "$1" + lastSeq), []);
    socket.binaryType = htmx.config.wsBinaryType;
    return socket;
  };

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var seq = firstMatch(/data-seq="(\d+)"/, event.detail.message);
    if (seq !== null && parseInt(seq, 10) <= lastSeq) {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:wsAfterMessage", function (event) {
    var message = event.detail.message;
    var seq = firstMatch(/data-seq="(\d+)"/, message);
    if (seq !== null) {
      lastSeq = Math.max(lastSeq, parseInt(seq, 10));
    }
    var refresh = firstMatch(/data-refresh="([^"]*)"/, message);
    if (refresh) {
      refresh.split(" ").forEach(function (panel) { dirty[panel] = true; });
    }
  });

  function status(event, text) {
    var stream = event.target.closest("[data-run]");
    var label = stream && document.getElementById("run-" + stream.dataset.run + "-stream-status");
    if (label) { label.textContent = text; }
  }
  document.addEventListener("htmx:wsOpen", function (event) { status(event, "live"); });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event.code;
    status(event, code === 4403 ? "not allowed to watch this run" : "disconnected, reconnecting…");
  });

  window.setInterval(function () {
    Object.keys(dirty).forEach(function (panel) {
      htmx.trigger(document.body, "run-refresh-" + panel);
    });
    dirty = {};
  }, REFRESH_MS);
})();
