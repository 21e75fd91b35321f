import { api, showError } from "../lib/api.js";
import { el, encodePath, params, view } from "../lib/dom.js";

// ------------------------------------------------------------------------------------------ knowledge
// The live version's knowledge tree as the API lists it: artifact types, their artifacts (front matter
// and body), rosters and the outline. An artifact's provenance links to its pages in the viewer.
export async function knowledgeView() {
  const p = params();
  const slug = p.get("ctx");
  const path = p.get("path") || "";
  const base = `/contexts/${encodeURIComponent(slug)}/knowledge`;
  const crumbs = el("nav", { class: "crumbs", "aria-label": "Knowledge path" },
    el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}` }, slug),
    ...path.split("/").filter(Boolean).map((part, i, all) => [" / ",
      el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}&path=${encodeURIComponent(all.slice(0, i + 1).join("/"))}${i === all.length - 1 && p.get("file") === "1" ? "&file=1" : ""}` }, part)]));
  view.replaceChildren(el("h1", {}, "Knowledge"), crumbs, el("p", { class: "muted" }, "Loading…"));
  try {
    if (p.get("file") !== "1") {  // a folder (a name may hold dots, so links say which they open)
      const listing = await (await api(`${base}/list${path ? "/" + encodePath(path) : ""}`)).json();
      const items = listing.entries.map((e) => {
        const next = path ? `${path}/${e.name}` : e.name;
        // a source's stored pages open in the page viewer, with its chunks and citing artifacts
        const source = e.kind === "file" && next.startsWith("pages/") && next.endsWith(".jsonl")
          ? next.slice("pages/".length, -".jsonl".length) : null;
        const href = source
          ? `#/page?${new URLSearchParams({ ctx: slug, path: source, page: "1" })}`
          : `#/knowledge?ctx=${encodeURIComponent(slug)}&path=${encodeURIComponent(next)}${e.kind === "file" ? "&file=1" : ""}`;
        return el("li", {}, el("a", { href },
          e.kind === "dir" ? `${e.name}/` : e.name), e.kind === "file" ? el("span", { class: "muted" }, ` ${e.size} bytes`) : null);
      });
      view.replaceChildren(el("h1", {}, "Knowledge"), crumbs, el("ul", { class: "listing" }, items));
      return;
    }
    const text = await (await api(`${base}/read/${encodePath(path)}`, { headers: { accept: "*/*" } })).text();
    const parts = text.startsWith("---\n") ? text.slice(4).split("\n---\n") : [null, text];
    const front = parts.length > 1 ? parts[0] : null;
    const body = parts.length > 1 ? parts.slice(1).join("\n---\n") : text;
    const links = [];
    if (front) {
      // provenance entries are `- source: …` / `page: N` / `start: N` / `end: N` lines of the YAML front matter
      const re = /- source: (.+)\n\s+page: (\d+)\n\s+start: (\d+)\n\s+end: (\d+)/g;
      for (const m of front.matchAll(re)) {
        const q = new URLSearchParams({ ctx: slug, path: m[1].trim(), page: m[2], start: m[3], end: m[4] });
        links.push(el("li", {}, el("a", { href: `#/page?${q}` }, `${m[1].trim()}, p. ${m[2]} [${m[3]}:${m[4]}]`)));
      }
    }
    view.replaceChildren(el("h1", {}, "Knowledge"), crumbs,
      el("pre", { class: "page-text" }, body),
      ...(links.length ? [el("h2", {}, "Evidence"), el("ul", { class: "evidence-links" }, links)] : []),
      ...(front ? [el("details", {}, el("summary", {}, "front matter"), el("pre", {}, front))] : []));
  } catch (error) {
    showError(view, error);
  }
}
