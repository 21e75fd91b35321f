// One SDK call of a step, as the trace records it: the call, its compact result summary (never the
// payload), whether it failed, and how long it took; a search's first hits with their scores and the
// features of each page that moved its rank most, folded.

import { el } from "./dom.js";

function summary(result) {
  if (result === null || result === undefined) return "";
  if (typeof result !== "object") return String(result);
  return Object.entries(result).filter(([key]) => key !== "ranked").map(([key, value]) => `${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`).join(", ");
}

function ranked(hits) {
  if (!Array.isArray(hits) || !hits.length) return null;
  const reason = (why) => Object.entries(why || {}).map(([name, value]) => `${name} ${value >= 0 ? "+" : ""}${value.toFixed(2)}`).join(", ");
  return el("details", { class: "ranked" }, el("summary", {}, "why these hits"),
    el("ol", {}, hits.map((hit) => el("li", {},
      `${hit.where} · ${Number(hit.score).toFixed(3)}`, hit.why ? el("span", { class: "muted" }, ` (${reason(hit.why)})`) : null))));
}

export function callLine(call) {
  const result = summary(call.result);
  const error = call.error ? call.error.message || call.error.type || String(call.error) : "";
  return el("div", { class: `call${call.ok === false ? " failed" : ""}` },
    el("code", {}, `${call.fn}(${typeof call.args === "string" ? call.args : JSON.stringify(call.args ?? "")})`),
    result ? el("span", { class: "result" }, ` → ${result}`) : null,
    error ? el("span", { class: "error" }, ` ✗ ${error}`) : null,
    call.duration_ms !== undefined ? el("span", { class: "muted" }, ` · ${Math.round(call.duration_ms)} ms`) : null,
    ranked(call.result?.ranked));
}
