import { api, showError } from "../lib/api.js";
import { el, screen, slugFollows, SLUG_PATTERN, SLUG_RULE, stacked, when } from "../lib/dom.js";

// What a context is doing now, from its live task flags, else whether a version is live.
function stateOf(c) {
  if (c.is_curating) return "curating…";
  if (c.is_importing) return "importing…";
  if (c.is_restoring) return "restoring…";
  return c.queryable ? "ready" : c.has_sources ? "not curated" : "empty";
}

const plural = (n, word) => `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`;

// How big the live version is: sources, pages, chunks (nothing for a context not curated yet).
function sizeOf(stats = {}) {
  if (stats.sources === undefined) return "—";
  return [plural(stats.sources, "source"), plural(stats.pages ?? 0, "page"), plural(stats.chunks ?? 0, "chunk")].join(" · ");
}

function tasksOf(stats = {}) {
  const parts = [];
  if (stats.tasks_active) parts.push(`${stats.tasks_active} running`);
  if (stats.tasks_failed) parts.push(`${stats.tasks_failed} failed`);
  if (stats.tokens_total) parts.push(`${stats.tokens_total.toLocaleString()} tokens`);
  return parts.join(" · ");
}

export async function contextsView() {
  const show = screen();
  show(el("h1", {}, "Contexts"), el("p", { class: "muted" }, "Loading…"));
  try {
    const data = await (await api("/contexts")).json();
    const problem = el("p", { class: "error", role: "alert" });
    const remove = async (c) => {
      if (!confirm(`Delete the context “${c.name || c.slug}” and everything compiled from it?`)) return;
      try {
        await api(`/contexts/${encodeURIComponent(c.slug)}`, { method: "DELETE" });
        contextsView();
      } catch (error) {
        problem.textContent = error.message;
      }
    };
    const rows = data.map((c) =>
      el("tr", { dataset: { slug: c.slug } },
        el("td", {},
          el("a", { href: `#/context?ctx=${encodeURIComponent(c.slug)}`, class: "name" }, c.name || c.slug),
          el("div", { class: "muted small" }, c.slug, c.description ? ` — ${c.description}` : "")),
        el("td", {}, el("span", { class: `badge ${c.queryable ? "ok" : ""}` }, stateOf(c))),
        el("td", { class: "size" }, sizeOf(c.stats)),
        el("td", {}, c.last_curated_at ? when(c.last_curated_at) : "never", el("div", { class: "muted small" }, tasksOf(c.stats))),
        el("td", { class: "row-actions" },
          c.queryable ? el("a", { href: `#/ask?ctx=${encodeURIComponent(c.slug)}`, class: "button" }, "Ask") : null,
          el("button", { type: "button", class: "secondary small", "aria-label": `Delete ${c.slug}`,
            onclick: () => remove(c) }, "Delete"))));
    // The slug follows the name as it is typed (editable); the server checks it again.
    const slug = el("input", { id: "new-slug", required: true, pattern: SLUG_PATTERN, title: SLUG_RULE,
      placeholder: "employee-handbook", autocapitalize: "off", spellcheck: "false" });
    const name = el("input", { id: "new-name", required: true, placeholder: "Employee handbook" });
    slugFollows(name, slug);
    const create = el("form", { class: "inline", onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api("/contexts", { method: "POST", body: { slug: slug.value, name: name.value } });
        location.hash = `#/context?ctx=${encodeURIComponent(slug.value)}`;
      } catch (error) {
        problem.textContent = error.message;
      }
    } }, el("span", { class: "pair" }, el("label", { for: "new-name" }, "New context"), name),
      el("span", { class: "pair" }, el("label", { for: "new-slug" }, "slug"), slug),
      el("button", { type: "submit" }, "Create"));
    const list = data.length
      ? stacked(el("table", { class: "grid contexts" },
        el("thead", {}, el("tr", {}, el("th", {}, "Context"), el("th", {}, "State"), el("th", {}, "Size"),
          el("th", {}, "Last curated"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
        el("tbody", {}, rows)))
      : el("div", { class: "empty" },
        el("p", {}, "No contexts yet."),
        el("p", { class: "muted" }, "Create one above, then add files to it — or from a terminal: ",
          el("code", {}, "sleuth compile ./docs --context docs")));
    show(el("h1", {}, "Contexts"), create, problem, list);
  } catch (error) {
    showError(show, error);
  }
}
