// The manifest, edited as a form (every field labelled, the API's problems shown at their field) or
// as JSON (for fields the manifest does not have yet); the two views share one document. Templates
// fill it; "Preview a curate" says what each type would be built by, which sources changed and, with
// a curation model, what it would cost, before anything is spent.

import { api, showError } from "../lib/api.js";
import { dollars } from "../lib/cost.js";
import { el, params, screen } from "../lib/dom.js";
import { JsonForm } from "../lib/form.js";

const round = (x) => (Number.isInteger(x) ? String(x) : x.toFixed(x < 10 ? 1 : 0));
const band = (b) => (b.low === b.high ? round(b.low) : `${round(b.low)}–${round(b.high)}`);

function previewTables(answer) {
  const plan = answer.preview;
  const out = [];
  if (plan) {
    const s = plan.sources;
    out.push(el("p", { class: "summary" }, `${s.total} sources: ${s.new.length} new · ${s.changed.length} changed · ` +
      `${s.removed.length} removed · ${s.unchanged} unchanged`));
    out.push(el("table", { class: "grid preview" },
      el("thead", {}, el("tr", {}, ["type", "kind", "scope", "format", "built by", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, plan.types.map((t) => el("tr", { class: t.built_by },
        el("td", {}, t.type), el("td", {}, t.kind), el("td", {}, t.scope), el("td", {}, t.format),
        el("td", {}, t.built_by), el("td", { class: "muted" }, t.note))))));
  }
  if (!answer.model) {
    out.push(el("p", { class: "muted" }, `no model would be called: ${answer.reason}`));
    return out;
  }
  const cost = (c) => (c ? (c.low === c.high ? dollars(c.low) : `${dollars(c.low)}–${dollars(c.high)}`) : "—");
  out.push(el("h3", {}, `Estimate with ${answer.model}`), el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, ["type", "calls", "cached", "input tokens", "output tokens", "seconds", "cost"]
      .map((h) => el("th", {}, h)))),
    el("tbody", {}, [...answer.types, answer.total].map((t) => el("tr", {}, el("td", {}, t.type), el("td", {}, band(t.calls)),
      el("td", {}, t.cached_calls), el("td", {}, band(t.input_tokens)), el("td", {}, band(t.output_tokens)),
      el("td", {}, band(t.seconds)), el("td", {}, cost(t.cost_usd)))))));
  if (answer.assumptions?.length) {
    out.push(el("details", {}, el("summary", {}, "what the estimate assumes"),
      el("ul", {}, answer.assumptions.map((a) => el("li", {}, a)))));
  }
  return out;
}

export async function designView() {
  const show = screen();
  const slug = params().get("ctx");
  const base = `/contexts/${encodeURIComponent(slug)}`;
  let manifestDoc = {};
  let schema = null;
  let form = null;
  const formHolder = el("div", { id: "panel-form", role: "tabpanel", "aria-labelledby": "tab-form" });
  const editor = el("textarea", { id: "manifest", rows: 18, spellcheck: "false", "aria-label": "Manifest (JSON)",
    "aria-describedby": "problems" });
  editor.addEventListener("input", () => { dirty = true; });
  const jsonHolder = el("div", { id: "panel-json", role: "tabpanel", "aria-labelledby": "tab-json", hidden: true }, editor);
  const problems = el("ul", { id: "problems", class: "problems", "aria-live": "polite" });
  const templates = el("select", { id: "template", "aria-label": "Template" });
  const useTemplate = el("button", { type: "button", class: "small" }, "Start from this template");
  const aboutTemplate = el("p", { class: "help", id: "template-help", "aria-live": "polite" });
  // Explore: the template that fits the sources, proposed without a model, with its reasons.
  const proposal = el("div", { class: "proposal", "aria-live": "polite" });
  const suggest = el("button", { type: "button", class: "small" }, "Suggest from the sources");
  templates.setAttribute("aria-describedby", "template-help");
  let dirty = false;  // edits not saved yet: loading a template asks first
  const estimate = el("div", { class: "estimate", "aria-live": "polite" });
  const saved = el("span", { class: "muted", "aria-live": "polite" });

  const load = (value) => {
    manifestDoc = value;
    editor.value = JSON.stringify(manifestDoc, null, 2);
    form = new JsonForm(manifestDoc, schema, () => {
      editor.value = JSON.stringify(manifestDoc, null, 2);
      dirty = true;
    });
    formHolder.replaceChildren(form.root);
  };
  // The JSON view is the source of truth while it is open: leaving it re-reads the text.
  const fromJson = () => {
    try {
      load(JSON.parse(editor.value || "{}"));
      return true;
    } catch (error) {
      problems.replaceChildren(el("li", { class: "error" }, `(file): not JSON: ${error.message}`));
      return false;
    }
  };
  const tab = (id, name, panel, other) => el("button", { type: "button", role: "tab", id, "aria-controls": panel.id,
    "aria-selected": id === "tab-form" ? "true" : "false", tabindex: id === "tab-form" ? 0 : -1, onclick: (event) => {
      if (!jsonHolder.hidden && panel === formHolder && !fromJson()) return;
      panel.hidden = false;
      other.hidden = true;
      for (const t of event.currentTarget.parentElement.children) {
        t.setAttribute("aria-selected", String(t === event.currentTarget));
        t.tabIndex = t === event.currentTarget ? 0 : -1;  // one tab stop; the arrows move between them
      }
    } }, name);
  const tabs = el("div", { role: "tablist", class: "tabs", "aria-label": "Edit as" },
    tab("tab-form", "Form", formHolder, jsonHolder), tab("tab-json", "JSON", jsonHolder, formHolder));
  tabs.addEventListener("keydown", (e) => {  // the ARIA tab pattern: arrows move between the tabs
    if (!["ArrowLeft", "ArrowRight"].includes(e.key)) return;
    const other = [...tabs.children].find((t) => t.getAttribute("aria-selected") !== "true");
    other.click();
    other.focus();
  });

  const showForm = () => tabs.querySelector("#tab-form").click();
  const save = el("button", { type: "button", onclick: async () => {
    problems.replaceChildren();
    saved.textContent = "";
    if (!jsonHolder.hidden && !fromJson()) return;
    try {
      await api(base, { method: "PUT", body: { manifest: manifestDoc } });
      dirty = false;
      form.showProblems([]);
      saved.textContent = "saved: the next curate uses it";
    } catch (error) {
      const found = error.envelope?.errors || [];
      if (!found.length) problems.append(el("li", { class: "error" }, error.message));
      if (found.length) showForm();  // each problem at its field
      form.showProblems(found);
      problems.append(...found.map((e) => el("li", { class: "error", dataset: { path: e.path } },
        el("a", { href: "#", onclick: (event) => {  // to the field, in the form
          event.preventDefault();
          showForm();
          (form.at(e.path) || formHolder).scrollIntoView({ block: "center" });
          form.at(e.path)?.focus();
        } }, el("code", {}, e.path || "(root)")), ` ${e.message}`)));
    }
  } }, "Save");
  const preview = el("button", { type: "button", onclick: async () => {
    if (!jsonHolder.hidden && !fromJson()) return;
    estimate.replaceChildren(el("p", { class: "muted" }, "Looking…"));
    try {  // of the manifest as edited here, saved or not (the server checks it, stores nothing)
      const body = { manifest: manifestDoc };
      const answer = await (await api(`${base}/curate/profile`, { method: "POST", body })).json();
      estimate.replaceChildren(el("h2", {}, "What a curate would build"), ...previewTables(answer));
    } catch (error) {
      const found = error.envelope?.errors || [];
      if (found.length) form.showProblems(found);
      estimate.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    }
  } }, "Preview a curate");
  show(el("h1", {}, `Design · ${slug}`), el("div", { class: "template" }, templates, " ", useTemplate, " ", suggest, aboutTemplate), proposal, tabs, formHolder, jsonHolder,
    el("p", { class: "muted hint" }, "Saving sends the manifest to the server, which checks it: each problem is shown at its field."),
    problems, el("div", { class: "actions" }, save, " ", preview, " ", saved), estimate);
  try {
    const [manifest, catalog, manifestSchema, models] = await Promise.all([
      api(`${base}/manifest`).then((r) => r.json()), api("/manifest/templates").then((r) => r.json()),
      api("/manifest/schema").then((r) => r.json()), api("/models").then((r) => r.json()).catch(() => ({ models: [] }))]);
    schema = manifestSchema;
    load(manifest);
    // Without a model, a template whose types need one builds less: say so before it is chosen.
    const offline = (models.models || []).filter((m) => m.available).every((m) => m.id === "sleuth/offline");
    for (const t of catalog.templates) {
      const lacking = offline && t.without_model?.skipped.length;
      templates.append(el("option", { value: t.id }, lacking ? `${t.label} (needs a model for ${t.without_model.skipped.length} of its types)` : t.label));
    }
    const describe = () => {
      const t = catalog.templates.find((x) => x.id === templates.value);
      if (!t) return;
      const skipped = t.without_model?.skipped || [];
      aboutTemplate.replaceChildren(`${t.description} For ${t.when_to_use[0].toLowerCase()}${t.when_to_use.slice(1)}`,
        offline && skipped.length ? el("span", { class: "skipped" },
          ` Without a model a curate skips ${skipped.join(", ")}${t.without_model.built.length ? ` and builds ${t.without_model.built.join(", ")}` : ""}; `,
          "every source is still searchable, and every PDF table is read into the built-in _cells table.") : "");
    };
    templates.addEventListener("change", describe);
    describe();
    // A model that may adapt the proposal to the corpus: the curate's, else the default, else any that runs.
    const usable = (models.models || []).filter((m) => m.available && m.id !== "sleuth/offline").map((m) => m.id);
    const adapter = [models.phase_defaults?.curate, models.default].find((id) => usable.includes(id)) || usable[0];
    const explore = async (model) => {
      proposal.replaceChildren(el("p", { class: "muted" }, model ? `Asking ${model} about a sample of the sources…` : "Reading a sample of the sources…"));
      try {
        const body = model ? { model } : undefined;
        const found = await (await api(`/contexts/${encodeURIComponent(slug)}/explore`, { method: "POST", body })).json();
        const fitted = found.proposed_by === "model";
        const use = el("button", { type: "button", class: "small" }, fitted ? `Use ${found.model}'s ${found.label}` : `Use ${found.label}`);
        use.addEventListener("click", () => {
          if (dirty && !confirm(`Replace the unsaved edits with the ${found.label} proposal?`)) return;
          templates.value = found.template;
          describe();
          if (fitted) {  // the model's types, not the template's, are what a curate would build
            const { built, skipped } = found.without_model;
            aboutTemplate.replaceChildren(`${found.model} fitted the ${found.label} template to these sources: ` +
              `a curate builds ${[...built, ...skipped].join(", ")}` +
              (skipped.length ? ` (${skipped.join(", ")} with a model).` : "."));
          }
          load(structuredClone(found.manifest));
          dirty = true;
        });
        const types = found.manifest.curate?.artifacts?.artifact_types || [];
        const ask = adapter && !fitted
          ? el("button", { type: "button", class: "small", onclick: () => explore(adapter) }, `Ask ${adapter} to fit it to these sources`) : null;
        proposal.replaceChildren(...[el("h2", {}, `Suggested: ${found.label} `,
          el("span", { class: "badge" }, `confidence ${Math.round(found.confidence * 100)}%`),
          fitted ? el("span", { class: "badge" }, `by ${found.model}`) : null),
          found.model_note ? el("p", { class: "error", role: "alert" }, found.model_note) : null,
          el("ul", {}, found.reasons.map((r) => el("li", {}, r))),
          fitted ? el("p", { class: "muted" }, `Types: ${types.map((t) => `${t.name} (${t.kind}${t.format === "sqlite" ? ", table" : ""})`).join(", ")}`) : null,
          use, " ", ask].filter(Boolean));  // replaceChildren, unlike el, would write "null"
      } catch (error) {
        showError(proposal, error);
      }
    };
    suggest.addEventListener("click", () => explore());
    // Before the first curate, the proposal is what a person needs first.
    const info = await (await api(`/contexts/${encodeURIComponent(slug)}`)).json();
    if (!info.live_version && info.has_sources) explore();  // by the rules: a model only when asked
    useTemplate.addEventListener("click", () => {  // a button, not the select's change: arrow keys browse freely
      const chosen = catalog.templates.find((t) => t.id === templates.value);
      if (!chosen || (dirty && !confirm(`Replace the unsaved edits with the ${chosen.label} template?`))) return;
      load(structuredClone(chosen.manifest));
      dirty = true;
    });
  } catch (error) {
    showError(show, error);
  }
}
