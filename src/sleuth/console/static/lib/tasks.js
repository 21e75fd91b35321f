// A long context operation (import, curate, pack, restore) is a task: poll it, showing its phase.

import { api } from "./api.js";
import { el } from "./dom.js";

export async function waitTask(id, where) {
  for (;;) {
    const task = await (await api(`/tasks/${id}`)).json();
    const p = task.progress || {};
    where.replaceChildren(el("span", { class: "muted" }, `${task.state} · ${p.label || p.phase || ""} · ${Math.round(p.pct || 0)}%`));
    if (["completed", "failed", "cancelled"].includes(task.state)) {
      if (task.state !== "completed") {
        where.replaceChildren(el("span", { class: "error", role: "alert" }, `${task.state}: ${task.error?.message || task.error || ""}`));
      }
      return task;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
}
