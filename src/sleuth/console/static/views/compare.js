// The turns of one comparison group side by side: workflow and model, status, latency, steps, tokens and
// cost, and each answer with its citations. Turns still running are polled until they end.

import { api, showError, TERMINAL } from "../lib/api.js";
import { renderAnswer } from "../lib/answer.js";
import { el, params, screen } from "../lib/dom.js";
import { costText } from "../lib/cost.js";

function column(query, workflow, prices) {
  const rollup = query.rollup || {};
  const answer = el("div");
  if (query.status === "completed") renderAnswer(answer, query);
  else if (query.error) answer.append(el("p", { class: "error" }, `${query.status}: ${query.error}`));
  else answer.append(el("p", { class: "muted" }, "Working…"));
  return el("article", { class: "turn-column", dataset: { query: query.id, status: query.status } },
    el("h2", {}, `${workflow} · ${query.model || "…"}`),
    el("dl", { class: "facts" },
      el("dt", {}, "status"), el("dd", {}, query.status),
      el("dt", {}, "latency"), el("dd", {}, `${(query.runtime_ms ?? 0) / 1000} s`),
      el("dt", {}, "steps"), el("dd", {}, String(rollup.n_steps ?? 0)),
      el("dt", {}, "tokens"), el("dd", {}, String(query.usage?.total_tokens ?? 0)),
      el("dt", {}, "cost"), el("dd", {}, costText(query.usage?.cost_usd, query.model, prices)),
      el("dt", {}, "citations"), el("dd", {}, String((query.citations || []).length))),
    answer,
    el("a", { href: `#/trace?q=${encodeURIComponent(query.id)}` }, "trace"));
}

export async function compareView() {
  const show = screen();
  const id = params().get("q");
  show(el("h1", {}, "Comparison"), el("p", { class: "muted" }, "Loading…"));
  try {
    const prices = await (await api("/models")).json();
    for (;;) {
      const first = await (await api(`/queries/${encodeURIComponent(id)}`)).json();
      const others = await Promise.all((first.comparison || []).map(async (c) =>
        ({ workflow: c.workflow, query: await (await api(`/queries/${encodeURIComponent(c.query_id)}`)).json() })));
      // A Query does not name its workflow; the other turns' `comparison` lists do.
      const workflowOf = new Map();
      for (const q of [first, ...others.map((o) => o.query)]) {
        for (const c of q.comparison || []) workflowOf.set(c.query_id, c.workflow);
      }
      const runs = [{ workflow: workflowOf.get(first.id) || "this turn", query: first }, ...others]
        .sort((a, b) => a.query.created - b.query.created || a.query.id.localeCompare(b.query.id));
      const shown = show(el("h1", {}, "Comparison"),
        el("p", { class: "question" }, first.input?.[0]?.content || ""),
        others.length ? "" : el("p", { class: "muted" }, "This turn is in no comparison group."),
        el("div", { class: "columns" }, runs.map((r) => column(r.query, r.workflow, prices))));
      if (!shown || runs.every((r) => TERMINAL.includes(r.query.status))) return;  // done, or left
      await new Promise((r) => setTimeout(r, 500));
    }
  } catch (error) {
    showError(show, error);
  }
}
