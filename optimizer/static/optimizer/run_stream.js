// The run page's websocket glue (htmx's ws extension does the swapping). Three jobs htmx cannot do alone:
// 1. skip events already shown (data-seq <= last), so a reconnect never duplicates a line;
// 2. reconnect from the last seq seen (rewrite ?after= in the socket URL), so nothing is missed;
// 3. re-fetch the state panel / chart / memory panel at most every REFRESH_MS when events say they changed;
// 4. say where each kernel waiting for its evaluation stands ("queued (2 ahead) · 14 s", "running · 40 s"):
//    the run's queue URL is asked every QUEUE_MS while any is waiting, and the times count on in between.
(function () {
  "use strict";
  var REFRESH_MS = 400;
  var QUEUE_MS = 2000;
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
    // A finished run's page only replays its events: it never reads "live".
    if (label && !label.dataset.finished) { label.textContent = text; }
  }
  document.addEventListener("htmx:wsOpen", function (event) { status(event, "live"); });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event.code;
    status(event, code === 4403 ? "not allowed to watch this run" : "disconnected, reconnecting…");
  });

  function elapsedText(seconds) {  // as benchmark.services.queue.elapsed_text
    var s = Math.max(0, Math.floor(seconds));
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (s < 60) { return s + " s"; }
    if (s < 3600) { return Math.floor(s / 60) + " min " + pad(s % 60) + " s"; }
    return Math.floor(s / 3600) + " h " + pad(Math.floor((s % 3600) / 60)) + " min";
  }

  function waiting() {
    // An evaluated kernel's span is swapped for the result (candidate.evaluated), which drops data-pending.
    return Array.prototype.slice.call(document.querySelectorAll(".cand-eval[data-pending][data-sha]"));
  }

  function showPlace(span) {
    var elapsed = parseFloat(span.dataset.elapsed) + (Date.now() - parseFloat(span.dataset.at)) / 1000;
    span.textContent = span.dataset.label + " · " + elapsedText(elapsed);
  }

  var asking = false;
  var stopped = false;
  function askQueue() {
    var stream = document.querySelector("[data-queue-url]");
    var spans = waiting().filter(function (span) { return span.dataset.sha; });
    if (!stream || asking || stopped || !spans.length) { return; }
    var shas = {};
    spans.forEach(function (span) { shas[span.dataset.sha] = true; });
    var query = Object.keys(shas).map(function (sha) { return "sha=" + encodeURIComponent(sha); }).join("&");
    asking = true;
    fetch(stream.dataset.queueUrl + "?" + query, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        waiting().forEach(function (span) {
          var place = data.kernels[span.dataset.sha];
          if (!place) { return; }  // not handed to the evaluator yet, or just finished (its result is on its way)
          span.dataset.label = place.label;
          span.dataset.state = place.state;
          span.dataset.elapsed = place.elapsed_s;
          span.dataset.at = Date.now();
          showPlace(span);
        });
        stopped = data.finished && !Object.keys(data.kernels).length;
      })
      .catch(function () { /* the next tick asks again */ })
      .then(function () { asking = false; });
  }
  window.setInterval(askQueue, QUEUE_MS);
  window.setInterval(function () {
    waiting().forEach(function (span) { if (span.dataset.at) { showPlace(span); } });
  }, 1000);
  document.addEventListener("DOMContentLoaded", askQueue);

  window.setInterval(function () {
    Object.keys(dirty).forEach(function (panel) {
      htmx.trigger(document.body, "run-refresh-" + panel);
    });
    dirty = {};
  }, REFRESH_MS);
})();
