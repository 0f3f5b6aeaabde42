// The run form offers only what fits the chosen problem: its own starting kernels, the platforms of its
// kernel language, and the backends of the chosen platform. The options carry data-problem, data-language
// and data-backends (optimizer/forms.py); without this script every option shows and the server refuses a
// mismatch with the same reasons.
(function () {
  "use strict";

  function show(option, visible) {
    option.hidden = !visible;
    // Disabled as well: a hidden option can still be reached with the keyboard in some browsers.
    if (!option.dataset.unavailable) option.disabled = !visible;
  }

  function firstUsable(select) {
    return Array.from(select.options).find(function (o) { return !o.hidden && !o.disabled; });
  }

  function keepUsable(select, preferred) {
    var current = select.options[select.selectedIndex];
    if (current && !current.hidden && !current.disabled) return;
    var pick = preferred && Array.from(select.options).find(function (o) {
      return o.value === preferred && !o.hidden && !o.disabled;
    });
    pick = pick || firstUsable(select);
    if (pick) select.value = pick.value;
  }

  function setUp(form) {
    var problem = form.querySelector("select[name=problem]");
    var start = form.querySelector("select[name=start]");
    var platform = form.querySelector("select[name=platform]");
    var backend = form.querySelector("select[name=backend]");
    if (!problem || !start || !platform || !backend) return;
    [platform, backend].forEach(function (select) {
      Array.from(select.options).forEach(function (o) { if (o.disabled) o.dataset.unavailable = "1"; });
    });

    function filterBackends() {
      var chosen = platform.options[platform.selectedIndex];
      var allowed = chosen && chosen.dataset.backends ? chosen.dataset.backends.split(" ") : null;
      Array.from(backend.options).forEach(function (o) { show(o, !allowed || allowed.indexOf(o.value) >= 0); });
      keepUsable(backend, chosen && chosen.dataset.defaultBackend);
    }

    function filterForProblem() {
      var chosen = problem.options[problem.selectedIndex];
      var language = chosen && chosen.dataset.language;
      Array.from(start.options).forEach(function (o) {
        show(o, !o.dataset.problem || o.dataset.problem === problem.value);
      });
      keepUsable(start, "baseline");
      Array.from(platform.options).forEach(function (o) {
        show(o, !language || o.dataset.language === language);
      });
      keepUsable(platform);
      filterBackends();
    }

    problem.addEventListener("change", filterForProblem);
    platform.addEventListener("change", filterBackends);
    filterForProblem();
  }

  function init() { document.querySelectorAll("form.run-form").forEach(setUp); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
