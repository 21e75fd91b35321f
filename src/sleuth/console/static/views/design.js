import { api, showError } from "../lib/api.js";
import { el, params, view } from "../lib/dom.js";

// ------------------------------------------------------------------------------------------ design
// The manifest as JSON, validated by the server: every problem is shown at its field path. Templates
// fill the editor; the profile says what a curate with a model would cost before anything is spent.
export async function designView() {
  const slug = params().get("ctx");
  const base = `/contexts/${encodeURIComponent(slug)}`;
  const editor = el("textarea", { id: "manifest", rows: 18, spellcheck: "false", "aria-describedby": "problems" });
  const problems = el("ul", { id: "problems", class: "problems", "aria-live": "polite" });
  const templates = el("select", { id: "template", "aria-label": "Template" }, el("option", { value: "" }, "Start from a template…"));
  const estimate = el("div", { class: "estimate", "aria-live": "polite" });
  const saved = el("span", { class: "muted", "aria-live": "polite" });
  const save = el("button", { type: "button", onclick: async () => {
    problems.replaceChildren();
    saved.textContent = "";
    let manifest;
    try {
      manifest = JSON.parse(editor.value || "{}");
    } catch (error) {
      problems.append(el("li", { class: "error" }, `(file): not JSON: ${error.message}`));
      return;
    }
    try {
      await api(base, { method: "PUT", body: { manifest } });
      saved.textContent = "saved: the next curate uses it";
    } catch (error) {
      const found = error.envelope?.errors || [];
      if (!found.length) problems.append(el("li", { class: "error" }, error.message));
      for (const e of found) {
        problems.append(el("li", { class: "error", dataset: { path: e.path } }, el("code", {}, e.path || "(root)"), ` ${e.message}`));
      }
    }
  } }, "Save");
  const profile = el("button", { type: "button", onclick: async () => {
    estimate.replaceChildren(el("p", { class: "muted" }, "Estimating…"));
    try {
      const p = await (await api(`${base}/curate/profile`, { method: "POST", body: {} })).json();
      if (!p.model) {
        estimate.replaceChildren(el("p", { class: "muted" }, `no model would be called: ${p.reason}`));
        return;
      }
      const band = (b) => (b.low === b.high ? `${b.low}` : `${b.low}–${b.high}`);
      estimate.replaceChildren(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["type", "calls", "cached", "input tokens", "output tokens", "seconds"].map((h) => el("th", {}, h)))),
        el("tbody", {}, [...p.types, p.total].map((t) => el("tr", {}, el("td", {}, t.type), el("td", {}, band(t.calls)),
          el("td", {}, t.cached_calls), el("td", {}, band(t.input_tokens)), el("td", {}, band(t.output_tokens)),
          el("td", {}, band(t.seconds)))))));
    } catch (error) {
      estimate.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    }
  } }, "Estimate a curate");
  view.replaceChildren(el("h1", {}, `Design · ${slug}`), templates, editor, problems,
    el("div", { class: "actions" }, save, " ", profile, " ", saved), estimate);
  try {
    const [manifest, catalog] = await Promise.all([
      (await api(`${base}/manifest`)).json(), (await api("/manifest/templates")).json()]);
    editor.value = JSON.stringify(manifest, null, 2);
    for (const t of catalog.templates) templates.append(el("option", { value: t.id }, t.label));
    templates.addEventListener("change", () => {
      const chosen = catalog.templates.find((t) => t.id === templates.value);
      if (chosen) editor.value = JSON.stringify(chosen.manifest, null, 2);
    });
  } catch (error) {
    showError(view, error);
  }
}
