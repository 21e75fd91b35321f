import { api, showError } from "../lib/api.js";
import { el, screen, stacked, when } from "../lib/dom.js";

// What a context is doing now, from its live task flags, else whether a version is live.
function stateOf(c) {
  if (c.is_curating) return "curating…";
  if (c.is_importing) return "importing…";
  if (c.is_restoring) return "restoring…";
  return c.queryable ? `ready · ${c.live_version}` : c.has_sources ? "not curated" : "empty";
}

export async function contextsView() {
  const show = screen();
  show(el("h1", {}, "Contexts"), el("p", { class: "muted" }, "Loading…"));
  try {
    const data = await (await api("/contexts")).json();
    const rows = data.map((c) =>
      el("tr", {},
        el("td", {}, el("a", { href: `#/context?ctx=${encodeURIComponent(c.slug)}` }, c.slug), " ",
          el("a", { href: `#/ask?ctx=${encodeURIComponent(c.slug)}`, class: "muted" }, "ask")),
        el("td", {}, c.name || ""),
        el("td", {}, stateOf(c)),
        el("td", {}, `${c.stats?.tasks_active ?? 0} running · ${c.stats?.tasks_total ?? 0} in all` +
          (c.stats?.tasks_failed ? ` · ${c.stats.tasks_failed} failed` : "")),
        el("td", {}, String(c.stats?.tokens_total ?? 0)),
        el("td", {}, when(c.last_curated_at))));
    const slug = el("input", { id: "new-slug", required: true, pattern: "[a-z][a-z0-9\\-]{2,63}", placeholder: "slug" });
    const name = el("input", { id: "new-name", required: true, placeholder: "name" });
    const problem = el("span", { class: "error", role: "alert" });
    const create = el("form", { class: "inline", onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api("/contexts", { method: "POST", body: { slug: slug.value, name: name.value } });
        location.hash = `#/context?ctx=${encodeURIComponent(slug.value)}`;
      } catch (error) {
        problem.textContent = error.message;
      }
    } }, el("label", { for: "new-slug" }, "New context: slug"), slug, el("label", { for: "new-name" }, "name"), name,
      el("button", { type: "submit" }, "Create"), problem);
    show(
      el("h1", {}, "Contexts"), create,
      stacked(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, el("th", {}, "Slug"), el("th", {}, "Name"), el("th", {}, "State"),
          el("th", {}, "Tasks"), el("th", {}, "Tokens"), el("th", {}, "Last curated"))),
        el("tbody", {}, rows))));
  } catch (error) {
    showError(show, error);
  }
}
