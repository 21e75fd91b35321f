import { api, showError } from "../lib/api.js";
import { el, encodePath, knowledgeHref, pageHref, params, screen, stacked } from "../lib/dom.js";

// The live version's knowledge tree as the API lists it: artifact types and their artifacts (what each
// is, its body, its evidence), rosters, the outline as a table, and each source's pages (in the viewer).
export async function knowledgeView() {
  const show = screen();
  const p = params();
  const slug = p.get("ctx");
  const path = p.get("path") || "";
  const base = `/contexts/${encodeURIComponent(slug)}/knowledge`;
  const crumbs = el("nav", { class: "crumbs", "aria-label": "Knowledge path" },
    el("a", { href: knowledgeHref({ ctx: slug }) }, slug),
    ...path.split("/").filter(Boolean).map((part, i, all) => [" / ",
      el("a", { href: knowledgeHref({ ctx: slug, path: all.slice(0, i + 1).join("/"),
        file: i === all.length - 1 && p.get("file") === "1" }) }, part)]));
  show(el("h1", {}, "Knowledge"), crumbs, el("p", { class: "muted" }, "Loading…"));
  try {
    if (p.get("file") !== "1") {  // a folder (a name may hold dots, so links say which they open)
      const listing = await (await api(`${base}/list${path ? "/" + encodePath(path) : ""}`)).json();
      const items = listing.entries.map((e) => {
        const next = path ? `${path}/${e.name}` : e.name;
        // a source's stored pages open in the page viewer, with its chunks and citing artifacts
        const source = e.kind === "file" && next.startsWith("pages/") && next.endsWith(".jsonl")
          ? next.slice("pages/".length, -".jsonl".length) : null;
        const href = source
          ? pageHref({ ctx: slug, path: source, page: 1 })
          : knowledgeHref({ ctx: slug, path: next, file: e.kind === "file" });
        return el("li", {}, el("a", { href },
          e.kind === "dir" ? `${e.name}/` : e.name), e.kind === "file" ? el("span", { class: "muted" }, ` ${e.size} bytes`) : null);
      });
      show(el("h1", {}, "Knowledge"), crumbs, el("ul", { class: "listing" }, items));
      return;
    }
    const shown = path.endsWith(".md") ? await artifactView(slug, base, path)
      : path === "outline.json" ? await outlineView(slug, base)
      : await rawView(base, path);
    show(el("h1", {}, "Knowledge"), crumbs, ...shown);
  } catch (error) {
    showError(show, error);
  }
}


// An artifact or roster: what it is, its body, and its evidence, each quote one click from its page.
async function artifactView(slug, base, path) {
  const art = await (await api(`${base}/artifact/${encodePath(path)}`)).json();
  const front = art.front_matter || {};
  const facts = ["name", "type", "kind", "scope", "format"].filter((k) => front[k] !== undefined && front[k] !== null);
  const evidence = (front.provenance || []).map((p) => {
    const href = pageHref({ ctx: slug, path: p.source, page: p.page, start: p.start, end: p.end });
    return el("li", {}, el("a", { href }, `${p.source}, p. ${p.page} [${p.start}:${p.end}]`), " ",
      p.quote ? el("q", {}, p.quote.length > 240 ? `${p.quote.slice(0, 240)}…` : p.quote) : null);
  });
  return [
    facts.length ? el("dl", { class: "facts" }, facts.flatMap((k) => [el("dt", {}, k), el("dd", {}, String(front[k]))])) : "",
    el("pre", { class: "page-text" }, art.body),
    ...(evidence.length ? [el("h2", {}, `Evidence (${evidence.length})`), el("ul", { class: "evidence-links" }, evidence)] : []),
    el("details", {}, el("summary", {}, "front matter"), el("pre", {}, JSON.stringify(front, null, 2))),
  ];
}

// Every artifact of the version, as the outline lists it, each linked to its file.
async function outlineView(slug, base) {
  const outline = await (await api(`${base}/read/outline.json`)).json();
  const rows = (outline.artifacts || []).map((a) => el("tr", {},
    el("td", {}, a.type), el("td", {}, el("a", { href: knowledgeHref({ ctx: slug, path: a.file, file: true }) }, a.name)), el("td", {}, a.kind),
    el("td", {}, a.scope), el("td", {}, String(a.sources_count ?? ""))));
  return [el("p", { class: "muted" }, `${rows.length} artifacts`), stacked(el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, ["type", "name", "kind", "scope", "sources"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)))];
}

async function rawView(base, path) {
  const text = await (await api(`${base}/read/${encodePath(path)}`, { headers: { accept: "*/*" } })).text();
  if (path.endsWith(".json")) {
    try {
      return [el("pre", { class: "page-text" }, JSON.stringify(JSON.parse(text), null, 2))];
    } catch (_) { /* shown as it is */ }
  }
  return [el("pre", { class: "page-text" }, text)];
}
