// logbook ui: while a page with a calendar is visible, re-read the table's
// status every 5 seconds and recolour the cells, so a running backfill is
// visible without a reload. One request at a time; paused while the tab is
// hidden; slower after an error; stopped when the server refuses (401,
// 403). No build step, no dependencies.
(function () {
  "use strict";
  const STATES = ["missing", "running", "complete", "stale", "corrupt"];
  const EVERY = 5000;
  let delay = EVERY;
  let busy = false;

  // Reasons arrive as `status --json` gives them; the server-rendered
  // title has their full sentences, a refreshed one their kind and the
  // table, date and versions they name.
  function describe(r) {
    const parts = [r.reason + ":"];
    for (const k of ["table", "date", "change", "mode", "written", "current"]) {
      if (r[k] != null) parts.push(String(r[k]));
    }
    if (r.columns) parts.push(r.columns.join(", "));
    if (r.replaced_at != null) parts.push("at version " + r.replaced_at);
    if (r.changed_at != null) parts.push("at version " + r.changed_at);
    if (r.read_version != null) parts.push("(read version " + r.read_version + ")");
    return parts.join(" ");
  }

  function title(d) {
    const lines = [d.date + " " + d.state].concat((d.reasons || []).map(describe));
    for (const p of d.problems || []) lines.push(p.kind + ": " + (p.file || "") + " " + p.detail);
    for (const r of d.runs || []) lines.push((r.abandoned ? "abandoned run " : "running ") + r.run_id);
    return lines.join("\n");
  }

  function apply(calendar, dates) {
    for (const d of dates) {
      const cell = calendar.querySelector('[data-date="' + d.date + '"]');
      if (!cell) continue;
      for (const s of STATES) cell.classList.remove("s-" + s);
      cell.classList.add("s-" + d.state);
      cell.title = title(d);
    }
  }

  function tick(calendar) {
    if (document.hidden || busy) return schedule(calendar);
    busy = true;
    fetch(calendar.dataset.status, { credentials: "same-origin" })
      .then((r) => {
        if (r.status === 401 || r.status === 403) throw "refused";
        if (!r.ok) throw "failed";
        return r.json();
      })
      .then((dates) => {
        apply(calendar, dates);
        delay = EVERY;
        busy = false;
        schedule(calendar);
      })
      .catch((e) => {
        busy = false;
        if (e === "refused") return; // stop: reloading the page shows why
        delay = Math.min(delay * 2, 60000);
        schedule(calendar);
      });
  }

  function schedule(calendar) {
    setTimeout(() => tick(calendar), delay);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const calendar = document.querySelector(".calendar[data-status]");
    if (calendar) schedule(calendar);
  });
})();
