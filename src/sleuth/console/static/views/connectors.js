// A context's connectors (issue 27), in its view: each with its schedule, its last sync (counts or
// the error), Sync now and Remove; and a form to add one, its fields from GET /connectors.

import { api, showError } from "../lib/api.js";
import { el, stacked, when } from "../lib/dom.js";
import { waitTask } from "../lib/tasks.js";

// A field's form type comes with its kind (`GET /api/connectors`: `types`): "list" (one a line), "number" or "text".
const typeOf = (chosen, key) => (chosen.types || {})[key] || "text";

function result(entry) {
  if (entry.last_error) return el("span", { class: "error" }, entry.last_error);
  const s = entry.last_sync;
  // a query key sees only a status (spec/api.md §3.1): no counts, no error
  if (!s) return el("span", { class: entry.status === "failed" ? "error" : "muted" },
    { ok: "synced", failed: "failed" }[entry.status] || "never synced");
  return `${s.added.length} added, ${s.changed.length} changed, ${s.deleted.length} deleted, ${s.unchanged} unchanged` +
    (s.commit ? ` · commit ${s.commit.slice(0, 10)}` : "");
}

export function connectorsSection(slug, onSynced) {
  const base = `/contexts/${encodeURIComponent(slug)}`;
  const rows = el("tbody");
  const state = el("div", { class: "connector-state", "aria-live": "polite" });
  const table = el("table", { class: "grid connectors" }, el("thead", {}, el("tr", {},
    ["Name", "Kind", "Every", "Last sync", "Result"].map((h) => el("th", {}, h)),
    el("th", {}, el("span", { class: "sr-only" }, "Actions")))), rows);
  const empty = el("p", { class: "muted" }, "No connectors: add one to keep a folder, a git repository, a bucket or a website in sync.");

  async function sync(entry) {
    try {
      const started = await (await api(`${base}/import`, { method: "POST", body: { connector: entry.name } })).json();
      const task = await waitTask(started.task_id, state);
      if (task.state === "completed") {
        state.replaceChildren(el("p", { class: "summary" }, `${entry.name}: ${task.output.summary}`));
        if (task.output.curate_task_id) {
          const curated = el("div");
          state.append(curated);
          await waitTask(task.output.curate_task_id, curated);
          curated.replaceChildren(el("span", { class: "muted" }, "curated"));
        }
        onSynced();
      }
    } catch (error) {
      showError(state, error);
    }
    await refresh();
  }

  async function refresh() {
    const listed = (await (await api(`${base}/connectors`)).json()).connectors;
    empty.hidden = listed.length > 0;
    table.hidden = listed.length === 0;
    rows.replaceChildren(...listed.map((entry) => el("tr", {},
      el("td", {}, entry.name), el("td", {}, entry.kind),
      el("td", {}, entry.every_s ? `${Math.round(entry.every_s / 60)} min` : "—"),
      el("td", {}, when(entry.last_attempt_at)), el("td", {}, result(entry)),
      el("td", { class: "row-actions" },
        el("button", { type: "button", class: "small", "aria-label": `sync ${entry.name} now`, onclick: () => sync(entry) }, "Sync now"),
        el("button", { type: "button", class: "small", "aria-label": `remove ${entry.name}`, onclick: async () => {
          if (!confirm(`Remove ${entry.name} and the files it brought? The next curate drops them.`)) return;
          try {
            await api(`${base}/connectors/${encodeURIComponent(entry.name)}`, { method: "DELETE" });
          } catch (error) {
            showError(state, error);
          }
          await refresh();
        } }, "Remove")))));
    stacked(table);  // one card per connector on a phone, Sync now and Remove in reach
  }

  // The add form: a kind, a name, and that kind's fields (its credentials as password fields).
  const kind = el("select", { id: "connector-kind", "aria-label": "Connector kind" });
  const name = el("input", { id: "connector-name", "aria-label": "Connector name", placeholder: "name (its folder)", required: true,
    pattern: "[a-z0-9][a-z0-9\\-]{0,62}" });
  const every = el("input", { id: "connector-every", "aria-label": "Sync every", placeholder: "every (30m, 1h; empty: by hand)" });
  const fields = el("div", { class: "connector-fields" });
  const problem = el("div", { "aria-live": "polite" });
  let kinds = [];
  const showFields = () => {
    const chosen = kinds.find((k) => k.kind === kind.value);
    if (!chosen) return;
    fields.replaceChildren(el("p", { class: "help" }, chosen.description),
      ...Object.entries(chosen.config).map(([key, hint]) => el("label", { class: "field" }, el("span", {}, key),
        typeOf(chosen, key) === "list" ? el("textarea", { rows: 2, dataset: { key }, placeholder: `${hint} (one a line)` })
          : el("input", { dataset: { key }, placeholder: hint, type: typeOf(chosen, key) === "number" ? "number" : "text", step: "any" }))),
      ...Object.keys(chosen.secret).map((key) => el("label", { class: "field" }, el("span", {}, key),
        el("input", { dataset: { secret: key }, type: "password", autocomplete: "off" }))));
  };
  kind.addEventListener("change", showFields);
  const form = el("form", { class: "connector-add", "aria-label": "Add a connector", onsubmit: async (event) => {
    event.preventDefault();
    const config = {}, secret = {};
    const chosen = kinds.find((k) => k.kind === kind.value) || {};
    for (const input of fields.querySelectorAll("[data-key]")) {
      const value = input.value.trim();
      if (!value) continue;
      const key = input.dataset.key;
      const type = typeOf(chosen, key);
      config[key] = type === "list" ? value.split(/[\n,]+/).map((v) => v.trim()).filter(Boolean)
        : type === "number" ? Number(value) : value;
    }
    for (const input of fields.querySelectorAll("[data-secret]")) if (input.value) secret[input.dataset.secret] = input.value;
    const body = { name: name.value, kind: kind.value, config };
    if (every.value.trim()) body.every = every.value.trim();
    if (Object.keys(secret).length) body.secret = secret;
    try {
      await api(`${base}/connectors`, { method: "POST", body });
      problem.replaceChildren();
      name.value = "";
      showFields();
      await refresh();
    } catch (error) {
      showError(problem, error);
    }
  } }, el("div", { class: "connector-head" }, kind, name, every), fields,
  el("div", {}, el("button", { type: "submit" }, "Add connector")), problem);

  const section = el("section", { class: "connectors-section", "aria-label": "Connectors" },
    el("h2", {}, "Connectors"), empty, table, state, el("details", {}, el("summary", {}, "add a connector"), form));
  api("/connectors").then((r) => r.json()).then((data) => {
    kinds = data.kinds;
    kind.replaceChildren(...kinds.map((k) => el("option", { value: k.kind }, k.kind)));
    showFields();
  }).catch((error) => showError(problem, error));
  refresh().catch((error) => showError(state, error));
  return section;
}
