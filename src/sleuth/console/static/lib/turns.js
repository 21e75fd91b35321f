// A list of turns (a session's, or a comparison's): status, latency, tokens, and a link to each trace.

import { el, stacked } from "./dom.js";

export function turnsTable(queries) {
  return stacked(el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, ["turn", "status", "latency", "tokens", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, (queries || []).map((q) => el("tr", {},
      el("td", {}, q.input?.[0]?.content ?? q.id), el("td", {}, q.status),
      el("td", {}, `${(q.rollup?.duration_ms ?? 0) / 1000} s`), el("td", {}, q.usage?.total_tokens ?? 0),
      el("td", {}, el("a", { href: `#/trace?q=${encodeURIComponent(q.id)}` }, "trace")))))));
}
