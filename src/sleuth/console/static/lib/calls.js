// One SDK call of a step, as the trace records it: the call, its compact result summary (never the
// payload), whether it failed, and how long it took.

import { el } from "./dom.js";

function summary(result) {
  if (result === null || result === undefined) return "";
  if (typeof result !== "object") return String(result);
  return Object.entries(result).map(([key, value]) => `${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`).join(", ");
}

export function callLine(call) {
  const result = summary(call.result);
  const error = call.error ? call.error.message || call.error.type || String(call.error) : "";
  return el("div", { class: `call${call.ok === false ? " failed" : ""}` },
    el("code", {}, `${call.fn}(${typeof call.args === "string" ? call.args : JSON.stringify(call.args ?? "")})`),
    result ? el("span", { class: "result" }, ` → ${result}`) : null,
    error ? el("span", { class: "error" }, ` ✗ ${error}`) : null,
    call.duration_ms !== undefined ? el("span", { class: "muted" }, ` · ${Math.round(call.duration_ms)} ms`) : null);
}
