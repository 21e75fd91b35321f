import { api, showError } from "../lib/api.js";
import { el, params, view } from "../lib/dom.js";

export async function traceView() {
  const id = params().get("q");
  view.replaceChildren(el("h1", {}, "Trace ", el("span", { class: "muted" }, id)), el("p", { class: "muted" }, "Loading…"));
  try {
    const trace = await (await api(`/queries/${encodeURIComponent(id)}/trace`)).json();
    const steps = el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["step", "status", "calls", "fresh in", "cached", "out", "ms"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (trace.steps || []).map((st) => el("tr", {},
        el("td", {}, st.step_id), el("td", {}, st.status), el("td", {}, (st.fns || []).join(", ")),
        el("td", {}, st.cost?.tokens_in_fresh ?? 0), el("td", {}, st.cost?.tokens_in_cached ?? 0),
        el("td", {}, st.cost?.tokens_out ?? 0),
        el("td", {}, (st.cost?.decide_ms ?? 0) + (st.cost?.execute_ms ?? 0))))));
    const evidence = el("table", { class: "grid evidence" },
      el("thead", {}, el("tr", {}, ["ref", "source", "page", "kind", "seen", "cited"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (trace.evidence || []).map((e) => el("tr", { class: e.cited ? "cited" : "" },
        el("td", {}, e.ref), el("td", {}, e.source), el("td", {}, e.page), el("td", {}, e.kind),
        el("td", {}, e.seen ? "yes" : ""), el("td", {}, e.cited ? "yes" : "")))));
    const dropped = (trace.citations_dropped || []).map((d) => el("li", {}, JSON.stringify(d)));
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
    view.replaceChildren(el("h1", {}, "Trace ", el("span", { class: "muted" }, id)),
      el("h2", {}, "Steps"), steps, el("h2", {}, "Evidence"), evidence,
      ...(dropped.length ? [el("h2", {}, "Dropped citations"), el("ul", {}, dropped)] : []),
      el("h2", {}, "Replay"), replay, outcome);
  } catch (error) {
    showError(view, error);
  }
}
