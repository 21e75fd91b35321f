import { api, showError } from "../lib/api.js";
import { bytes, el, encodePath, knowledgeHref, pageHref, params, screen, stacked } from "../lib/dom.js";
import { markdown } from "../lib/markdown.js";

// What each part of a version's knowledge tree holds, said once for the listing.
const HOLDS = {
  artifacts: "what curation wrote: one folder per artifact type, one Markdown file per artifact",
  rosters: "“all X” lists: every artifact of a type, every source",
  chunks: "the chunks search reads, one JSON line each, per source",
  pages: "each source's pages as stored (open one to read it page by page)",
  "outline.json": "every artifact, its type, kind, scope and sources",
  "sources.json": "every source: path, format, pages, title, periods",
};

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
        const holds = path ? null : HOLDS[e.name];
        return el("li", {}, el("a", { href },
          e.kind === "dir" ? `${e.name}/` : e.name), e.kind === "file" ? el("span", { class: "muted" }, ` ${bytes(e.size)}`) : null,
          holds ? el("span", { class: "muted" }, ` — ${holds}`) : null);
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
    markdown(art.body),
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

// JSON Lines as a table: one row a record, the keys of the first records as columns (nested values
// as compact JSON, long ones cut), the first 500 records.
function recordsTable(text) {
  const lines = text.split("\n").filter((l) => l.trim());
  const records = [];
  for (const line of lines.slice(0, 500)) {
    try { records.push(JSON.parse(line)); } catch (_) { return null; }
  }
  if (!records.length || records.some((r) => typeof r !== "object" || r === null || Array.isArray(r))) return null;
  const columns = [...new Set(records.slice(0, 50).flatMap((r) => Object.keys(r)))].slice(0, 12);
  const shown = (v) => {
    const s = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
    return s.length > 300 ? `${s.slice(0, 300)}…` : s;
  };
  return [el("p", { class: "muted" }, `${lines.length} records${lines.length > 500 ? " (the first 500 shown)" : ""}`),
    el("div", { class: "scroll", tabindex: "0" }, el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, records.map((r) => el("tr", {}, columns.map((c) => el("td", {}, shown(r[c])))))))),
    el("details", {}, el("summary", {}, "as stored"), el("pre", {}, text.slice(0, 20000)))];
}

async function rawView(base, path) {
  const text = await (await api(`${base}/read/${encodePath(path)}`, { headers: { accept: "*/*" } })).text();
  if (path.endsWith(".jsonl")) {
    const table = recordsTable(text);
    if (table) return table;
  }
  if (path.endsWith(".md")) return [markdown(text)];
  if (path.endsWith(".json")) {
    try {
      return [el("pre", { class: "page-text" }, JSON.stringify(JSON.parse(text), null, 2))];
    } catch (_) { /* shown as it is */ }
  }
  return [el("pre", { class: "page-text" }, text)];
}
