// A long context operation (import, curate, pack, restore) is a task: poll it, showing its progress
// bar, the phase it is in with its counts ("parse 3/8"), the phases done and to come, and the time left.

import { api, TERMINAL } from "./api.js";
import { el } from "./dom.js";

function progressOf(task) {
  const p = task.progress || {};
  const phases = p.phases || [];
  const current = task.state === "completed" ? phases.length : phases.indexOf(p.phase);
  const eta = p.eta_seconds ? ` · about ${Math.ceil(p.eta_seconds)} s left` : "";
  return el("div", { class: "task", dataset: { state: task.state } },
    el("progress", { max: 100, value: p.pct || 0, "aria-label": `${task.workflow} progress` }),
    el("span", { class: "muted" }, ` ${task.state} · ${p.label || p.phase || ""} · ${Math.round(p.pct || 0)}%${eta}`),
    phases.length > 1 ? el("ol", { class: "phases", "aria-label": "Phases" }, phases.map((phase, i) =>
      el("li", { class: i < current ? "done" : i === current ? "current" : "", "aria-current": i === current ? "step" : null }, phase)))
      : null);
}

export async function waitTask(id, where) {
  for (;;) {
    const task = await (await api(`/tasks/${id}`)).json();
    where.replaceChildren(progressOf(task));
    if (!where.isConnected) return task;  // the person left the view: stop polling (it is still running)
    if (TERMINAL.includes(task.state)) {
      if (task.state !== "completed") {
        where.replaceChildren(el("span", { class: "error", role: "alert" }, `${task.state}: ${task.error?.message || task.error || ""}`));
      }
      return task;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
}
