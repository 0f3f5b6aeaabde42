// Draws the server-built Plotly figures (benchmark/display.py figure_html): each is a div holding the figure as
// JSON, so pages need no inline script and the Content-Security-Policy allows none. Runs when the page loads
// and whenever htmx swaps new content in (a live run's chart, a campaign's progress).
(function () {
  "use strict";
  function draw(root) {
    root.querySelectorAll("[data-plotly-figure]").forEach(function (div) {
      if (div.dataset.plotlyDrawn) return;
      div.dataset.plotlyDrawn = "1";
      var figure = JSON.parse(div.dataset.plotlyFigure);
      var config = JSON.parse(div.dataset.plotlyConfig || "{}");
      window.Plotly.newPlot(div, figure.data || [], figure.layout || {}, config);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  // afterSwap runs in the same task as the swap, so no one ever sees a swapped-in figure not yet drawn (the
  // settle that htmx:load waits for left the chart empty for a moment after the rest had changed). The whole
  // document: after an outerHTML swap the event's target is the element that was replaced.
  document.addEventListener("htmx:afterSwap", function () { draw(document); });
  document.addEventListener("htmx:load", function (event) { draw(event.target.parentNode || document); });
})();
