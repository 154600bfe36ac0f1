// agentgym view: the only script the pages run (their Content-Security-Policy allows no other).
"use strict";
(function () {
  // A run still being written: poll its counts and say when new episodes arrived.
  const body = document.body;
  const statusUrl = body.dataset.status;
  const known = Number(body.dataset.episodes || 0);
  const notice = document.getElementById("notice");
  if (statusUrl && notice) {
    const poll = async function () {
      if (document.hidden) return;
      try {
        const response = await fetch(statusUrl, { cache: "no-store" });
        if (!response.ok) return;
        const status = await response.json();
        const fresh = status.episodes - known;
        if (fresh > 0) {
          notice.querySelector("span").textContent = fresh + " new episode" + (fresh === 1 ? "" : "s") + ",";
          notice.querySelector("a").href = window.location.href;
          notice.hidden = false;
        }
      } catch (error) {
        // the viewer stopped or restarts: ask again at the next tick
      }
    };
    window.setInterval(poll, 3000);
  }

  // The token view's colouring, switched without a reload (the links work without this script too).
  document.querySelectorAll(".token-view a.mode[data-colour]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      const view = link.closest(".token-view");
      ["behaviour", "trainer", "ratio"].forEach(function (mode) { view.classList.remove("mode-" + mode); });
      view.classList.add("mode-" + link.dataset.colour);
      view.querySelectorAll("a.mode").forEach(function (other) { other.classList.toggle("on", other === link); });
      window.history.replaceState(null, "", link.href);
    });
  });

  // The episode list's drop-downs apply as soon as they change.
  document.querySelectorAll("form.filters select.auto").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
})();
