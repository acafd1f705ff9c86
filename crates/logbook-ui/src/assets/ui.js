// logbook ui: while a page with a calendar is open, re-read the table's
// status every 5 seconds and recolour the cells, so a running backfill is
// visible without a reload. No build step, no dependencies.
(function () {
  "use strict";
  const STATES = ["missing", "running", "complete", "stale", "corrupt"];
  function refresh(calendar) {
    fetch(calendar.dataset.status, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((dates) => {
        for (const d of dates) {
          const cell = calendar.querySelector('[data-date="' + d.date + '"]');
          if (!cell) continue;
          for (const s of STATES) cell.classList.remove("s-" + s);
          cell.classList.add("s-" + d.state);
          const lines = [d.date + " " + d.state].concat(d.reasons.map(describe));
          cell.title = lines.join("\n");
        }
      })
      .catch(() => {});
  }
  // Reasons arrive as JSON; the server-rendered title has their full text,
  // this keeps their kind and the date or table they name.
  function describe(reason) {
    return typeof reason === "string" ? reason : JSON.stringify(reason);
  }
  document.addEventListener("DOMContentLoaded", () => {
    const calendar = document.querySelector(".calendar[data-status]");
    if (calendar) setInterval(() => refresh(calendar), 5000);
  });
})();
