// fairrelay console: the only script. It remembers the operator token for
// this browser tab (sessionStorage, cleared when the tab closes) so that it
// is typed once, and asks before a bulk redrive. Every form works without it.
(function () {
  "use strict";
  var key = "fairrelay-token";
  document.querySelectorAll("input[data-remember-token]").forEach(function (input) {
    try {
      var t = sessionStorage.getItem(key);
      if (t && !input.value) { input.value = t; }
      input.form.addEventListener("submit", function () {
        if (input.value) { sessionStorage.setItem(key, input.value); }
      });
    } catch (e) { /* storage disabled: the field stays as typed */ }
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { ev.preventDefault(); }
    });
  });
})();
