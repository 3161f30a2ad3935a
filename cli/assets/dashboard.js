// settle dashboard: refresh the queue list's counts and sparklines from
// /api/queues. Values are written with textContent only, never as markup.
"use strict";
(function () {
  const table = document.getElementById("queues");
  if (!table) return;
  const every = Math.max(500, Number(table.dataset.refreshMs) || 2000);
  const dash = (v) => (v === null || v === undefined ? "\u2013" : String(v));
  const age = (s) => {
    if (s === null || s === undefined) return "\u2013";
    s = Math.floor(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return [h ? h + "h" : "", m ? m + "m" : "", (r || (!h && !m)) ? r + "s" : ""].filter(Boolean).join(" ");
  };
  function spark(cell, rates) {
    const line = cell.querySelector("polyline");
    const label = cell.querySelector(".rate");
    if (!line || !label) return;
    const max = Math.max(0, ...rates);
    const n = Math.max(rates.length - 1, 1);
    line.setAttribute("points", rates.map((r, i) =>
      (120 * i / n).toFixed(1) + "," + (max > 0 ? 22 - 20 * r / max : 22).toFixed(1)).join(" "));
    label.textContent = (rates.length ? rates[rates.length - 1] : 0).toFixed(1) + "/s";
  }
  async function refresh() {
    try {
      const r = await fetch("/api/queues", { credentials: "same-origin", cache: "no-store" });
      if (!r.ok) return;
      for (const q of await r.json()) {
        const row = [...table.querySelectorAll("tr[data-queue]")].find((tr) => tr.dataset.queue === q.queue);
        if (!row) continue;
        const set = (f, v) => { const c = row.querySelector('[data-field="' + f + '"]'); if (c) c.textContent = v; };
        set("ready", String(q.ready));
        set("delayed", String(q.delayed));
        set("in_flight", dash(q.in_flight));
        set("dead", dash(q.dead));
        set("oldest", age(q.oldest_ready_age_seconds));
        if ("dead_tuples" in q) set("dead_tuples", dash(q.dead_tuples));
        const cell = row.querySelector(".spark-cell");
        if (cell) spark(cell, q.drained_per_second || []);
      }
      table.dataset.refreshed = String(Date.now());
    } catch (e) {
      // the server is away: keep the last counts and try again
    }
  }
  setInterval(refresh, every);
})();
