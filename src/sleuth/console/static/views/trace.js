// The trace explorer: a finished turn's steps (each SDK call with its result summary and time), tokens
// per step (fresh input, cached, output), latency and cost where the catalog has prices, the evidence
// kept (seen, cited) and the citations dropped with their reason; replay, and the comparison group.

import { api, showError } from "../lib/api.js";
import { callLine } from "../lib/calls.js";
import { costText, dollars, pricingOf, stepCost } from "../lib/cost.js";
import { el, pageHref, params, screen, stacked } from "../lib/dom.js";

function stepsTable(trace, pricing) {
  const head = ["step", "status", "calls", "fresh in", "cached", "out", "ms", "cost"];
  return el("table", { class: "grid steps-table" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, (trace.steps || []).map((st) => {
      const cost = stepCost(st.cost, pricing);
      return el("tr", { class: st.status },
        el("td", {}, st.step_id, st.commentary ? el("div", { class: "muted" }, st.commentary) : null),
        el("td", {}, st.status, st.error ? el("div", { class: "error" }, st.error.message || st.error.type) : null),
        el("td", {}, (st.calls || []).map(callLine),
          st.code?.source ? el("details", {}, el("summary", {}, "code"), el("pre", {}, st.code.source)) : null,
          st.output ? el("details", {}, el("summary", {}, `what the model saw${st.output_truncated ? " (cut)" : ""}`),
            el("pre", {}, st.output)) : null),
        el("td", {}, st.cost?.tokens_in_fresh ?? 0), el("td", {}, st.cost?.tokens_in_cached ?? 0),
        el("td", {}, st.cost?.tokens_out ?? 0),
        el("td", {}, (st.cost?.decide_ms ?? 0) + (st.cost?.execute_ms ?? 0)),
        el("td", {}, cost === null ? "—" : dollars(cost)));
    })));
}

function evidenceTable(trace) {
  return el("table", { class: "grid evidence" },
    el("thead", {}, el("tr", {}, ["ref", "source", "page", "kind", "seen", "cited"].map((h) => el("th", {}, h)))),
    el("tbody", {}, (trace.evidence || []).map((e) => el("tr", { class: e.cited ? "cited" : "" },
      el("td", {}, e.ref),
      el("td", {}, el("a", { href: pageHref({ ctx: e.context, path: e.source, page: e.page, start: e.start, end: e.end }) },
        e.source)),
      el("td", {}, e.page), el("td", {}, e.kind),
      el("td", {}, e.seen ? "yes" : ""), el("td", {}, e.cited ? "yes" : "")))));
}

function droppedList(trace) {
  return el("ul", { class: "dropped" }, (trace.citations_dropped || []).map((d) =>
    el("li", {}, el("strong", {}, d.marker ?? "?"), ` ${d.source ?? ""}${d.page ? `, p. ${d.page}` : ""}: `,
      el("span", { class: "error" }, d.reason ?? ""))));
}

function summary(query, trace, catalog) {
  const synthesis = trace.synthesis;
  return el("dl", { class: "facts" },
    el("dt", {}, "status"), el("dd", {}, query.status, query.error ? ` (${query.error})` : ""),
    el("dt", {}, "model"), el("dd", {}, query.model || "—"),
    el("dt", {}, "latency"), el("dd", {}, `${(query.runtime_ms ?? 0) / 1000} s`),
    el("dt", {}, "tokens"), el("dd", {}, `${query.usage?.input_tokens ?? 0} in / ${query.usage?.output_tokens ?? 0} out`),
    el("dt", {}, "cost"), el("dd", { id: "turn-cost" }, costText(query.usage?.cost_usd, query.model, catalog)),
    el("dt", {}, "stop"), el("dd", {}, trace.rollup?.stop_reason || "—"),
    el("dt", {}, "synthesis"), el("dd", {}, synthesis
      ? `${synthesis.status}${synthesis.method ? ` (${synthesis.method})` : ""} · ${synthesis.tokens_in} in / ${synthesis.tokens_out} out · ${synthesis.ms} ms`
      : "—"));
}

function replayControl(id) {
  const outcome = el("p", { id: "replay-result", "aria-live": "polite" });
  const replay = el("button", { type: "button", onclick: async () => {
    outcome.textContent = "Replaying…";
    try {
      const report = await (await api(`/queries/${encodeURIComponent(id)}/replay`, {
        method: "POST", body: {}, headers: { "x-pinecone-api-version": "unstable" } })).json();
      outcome.textContent = report.identical
        ? `identical (${report.steps_compared} steps compared)`
        : `differs at ${report.first_difference.step_id}: ${report.first_difference.field}`;
    } catch (error) {
      outcome.textContent = error.message;
    }
  } }, "Replay");
  return [replay, outcome];
}

export async function traceView() {
  const show = screen();
  const id = params().get("q");
  const title = el("h1", {}, "Trace ", el("span", { class: "muted" }, id));
  show(title, el("p", { class: "muted" }, "Loading…"));
  try {
    const [trace, query, catalog] = await Promise.all([
      api(`/queries/${encodeURIComponent(id)}/trace`).then((r) => r.json()),
      api(`/queries/${encodeURIComponent(id)}`).then((r) => r.json()),
      api("/models").then((r) => r.json()),
    ]);
    // Steps are priced as the server prices the turn: with the first model's catalog entry.
    const pricing = pricingOf(catalog, trace.models?.[0]?.id ?? query.model);
    const compared = (query.comparison || []).length
      ? el("p", {}, el("a", { href: `#/compare?q=${encodeURIComponent(id)}` },
        `compare with the ${query.comparison.length} other turn(s) of its comparison group`))
      : "";  // replaceChildren would write a null as the text "null"
    show(title, el("p", { class: "question" }, query.input?.[0]?.content || ""),
      summary(query, trace, catalog), compared,
      el("h2", {}, "Steps"), stacked(stepsTable(trace, pricing)),
      el("h2", {}, "Evidence"), stacked(evidenceTable(trace)),
      ...((trace.citations_dropped || []).length ? [el("h2", {}, "Dropped citations"), droppedList(trace)] : []),
      el("h2", {}, "Replay"), ...replayControl(id));
  } catch (error) {
    showError(show, error);
  }
}
