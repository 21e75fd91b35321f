// The table browser, after datasette: every SQL table of the live version, each one paged, sorted,
// filtered by column (`column__op=value`, the API's spelling, kept in the URL so a view is a link),
// faceted, exported as CSV or JSON, and a read-only SQL box over them all. Evidence columns
// (`_provenance`, a row's source and page) are links to the page viewer, the quote marked.

import { api, showError } from "../lib/api.js";
import { el, pageHref, params, screen } from "../lib/dom.js";

const RESERVED = new Set(["ctx", "t", "offset", "order", "desc", "facet", "sql"]);
const OPS = [["exact", "="], ["not", "≠"], ["contains", "contains"], ["startswith", "starts with"],
  ["gt", ">"], ["gte", "≥"], ["lt", "<"], ["lte", "≤"], ["isnull", "is empty"], ["notnull", "is not empty"]];
const NO_VALUE = new Set(["isnull", "notnull"]);
// What the tables every context has hold (typed tables are the manifest's own).
const BUILT_IN = {
  _sources: "one row per source: path, type, title, pages, periods",
  _chunks: "the chunks search reads, with their page, span and section path",
  _artifacts: "every artifact: type, name, file, sources",
  _edges: "relations between artifacts",
  _glossary: "terms and their definitions",
  _tables: "tables found in the documents' pages",
  _cells: "every cell of those tables: row label, column header, period, value, span",
};

function tablesHref(changes) {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) q.delete(k); else q.set(k, v);
  }
  return `#/tables?${q}`;
}

// The filters a URL holds: every parameter that is not the view's own.
function filtersOf(p) {
  return [...p.entries()].filter(([k]) => !RESERVED.has(k)).map(([key, value]) => {
    const cut = key.lastIndexOf("__");
    const op = cut > 0 && OPS.some(([o]) => o === key.slice(cut + 2)) ? key.slice(cut + 2) : "exact";
    return { column: op === "exact" && !key.endsWith("__exact") ? key : key.slice(0, cut), op, value };
  });
}

function filterKey(f) {
  return f.op === "exact" ? f.column : `${f.column}__${f.op}`;
}

// A cell as a person reads it: evidence as links to its page, long text cut (all of it on hover).
function cell(slug, column, value, row, columns) {
  if (value === null || value === undefined) return el("td", { class: "null" }, "");
  if (column === "_provenance" || column === "provenance") {
    try {
      const spans = JSON.parse(value);
      if (Array.isArray(spans)) {
        return el("td", {}, el("ul", { class: "spans" }, spans.map((s) => el("li", {},
          el("a", { href: pageHref({ ctx: slug, path: s.source, page: s.page, start: s.start, end: s.end }),
            title: s.quote || "" }, `${s.source.split("/").pop()}, p. ${s.page}`)))));
      }
    } catch (_) { /* not the evidence form: shown as text */ }
  }
  if (column === "page" && typeof value === "number") {
    const source = row[columns.indexOf("source")] ?? row[columns.indexOf("path")];
    if (typeof source === "string") {
      const start = row[columns.indexOf("start")], end = row[columns.indexOf("end")];
      const span = Number.isInteger(start) && Number.isInteger(end) ? { start, end } : {};
      return el("td", { class: "num" }, el("a", { href: pageHref({ ctx: slug, path: source, page: value, ...span }) }, String(value)));
    }
  }
  if (typeof value === "number") return el("td", { class: "num" }, String(value));
  const text = String(value);
  return el("td", { title: text.length > 200 ? text : null }, text.length > 200 ? `${text.slice(0, 200)}…` : text);
}

function resultTable(slug, columns, rows, head = null) {
  return el("div", { class: "scroll", tabindex: "0" }, el("table", { class: "grid data" },
    el("thead", {}, el("tr", {}, head || columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((v, i) => cell(slug, columns[i], v, r, columns)))))));
}

// A download through the API (the login token rides on the request, so not a plain link).
function exportLink(path, label, fileName) {
  return el("button", { type: "button", class: "small", onclick: async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    try {
      const blob = await (await api(path, { headers: { accept: "*/*" } })).blob();
      const link = el("a", { href: URL.createObjectURL(blob), download: fileName });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    } catch (error) {
      showError(button.parentElement, error);
    } finally {
      button.disabled = false;
    }
  } }, label);
}

function sqlBox(slug, text) {
  const box = el("textarea", { id: "sql", rows: 4, spellcheck: "false", "aria-label": "SQL",
    placeholder: "SELECT category, count(*) FROM product GROUP BY category" });
  box.value = text || "";
  const out = el("div", { class: "sql-result", "aria-live": "polite" });
  const run = async () => {
    if (!box.value.trim()) return;
    history.replaceState(history.state, "", tablesHref({ sql: box.value, t: null, offset: null }));
    out.replaceChildren(el("p", { class: "muted" }, "Running…"));
    try {
      const result = await (await api(`/contexts/${encodeURIComponent(slug)}/sql`,
        { method: "POST", body: { sql: box.value, max_rows: 1000 } })).json();
      out.replaceChildren(
        el("p", { class: "muted" }, `${result.rows.length} rows${result.truncated ? " (cut at the limit: narrow the query)" : ""}`),
        resultTable(slug, result.columns, result.rows));
    } catch (error) {
      showError(out, error);
    }
  };
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
  });
  const form = el("form", { class: "sql", onsubmit: (e) => { e.preventDefault(); run(); } },
    el("label", { for: "sql" }, "SQL ", el("span", { class: "muted small" }, "read-only, over every table of this context (Ctrl+Enter runs)")),
    box, el("div", {}, el("button", { type: "submit" }, "Run SQL")));
  if (box.value.trim()) run();
  return [form, out];
}

async function listView(show, slug, p) {
  const data = await (await api(`/contexts/${encodeURIComponent(slug)}/tables`)).json();
  const row = (t) => el("tr", {},
    el("td", {}, el("a", { href: `#/tables?ctx=${encodeURIComponent(slug)}&t=${encodeURIComponent(t.name)}` }, t.name)),
    el("td", { class: "num" }, t.rows.toLocaleString()),
    el("td", { class: "muted" }, BUILT_IN[t.name] || t.columns.filter((c) => !c.name.startsWith("_")).map((c) => c.name).join(", ")));
  const typed = data.tables.filter((t) => !t.name.startsWith("_"));
  const builtIn = data.tables.filter((t) => t.name.startsWith("_"));
  const table = (list) => el("table", { class: "grid stack" },
    el("thead", {}, el("tr", {}, el("th", {}, "table"), el("th", {}, "rows"), el("th", {}, "holds"))),
    el("tbody", {}, list.map(row)));
  show(el("h1", {}, "Tables ", el("span", { class: "muted" }, slug)),
    el("h2", {}, "Typed tables"),
    typed.length ? table(typed) : el("p", { class: "empty" }, "No typed tables: the manifest declares none, or none was curated yet."),
    el("h2", {}, "Built in"), table(builtIn),
    el("h2", {}, "Query"), ...sqlBox(slug, p.get("sql")));
}

export async function tablesView() {
  const show = screen();
  const p = params();
  const slug = p.get("ctx"), name = p.get("t");
  const base = `/contexts/${encodeURIComponent(slug)}/tables`;
  try {
    if (!name) return await listView(show, slug, p);
    const filters = filtersOf(p);
    const facets = p.getAll("facet");
    const q = new URLSearchParams({ offset: p.get("offset") || "0", limit: "50" });
    if (p.get("order")) q.set("order", p.get("order"));
    if (p.get("desc")) q.set("desc", p.get("desc"));
    for (const f of filters) q.append(filterKey(f), f.value);
    for (const f of facets) q.append("facet", f);
    const page = await (await api(`${base}/${encodeURIComponent(name)}?${q}`)).json();
    const head = page.columns.map((c) => {
      const sorted = page.order === c;
      const next = sorted && !page.desc ? "true" : "false";
      return el("th", { "aria-sort": sorted ? (page.desc ? "descending" : "ascending") : "none" },
        el("a", { href: tablesHref({ order: c, desc: next, offset: "0" }) }, c, sorted ? (page.desc ? " ▼" : " ▲") : ""));
    });
    const end = Math.min(page.offset + page.limit, page.total);
    const nav = el("nav", { class: "pager", "aria-label": "Rows" },
      page.offset > 0 ? el("a", { href: tablesHref({ offset: String(Math.max(0, page.offset - page.limit)) }), rel: "prev" }, "← previous") : null,
      ` rows ${page.total ? page.offset + 1 : 0}–${end} of ${page.total.toLocaleString()} `,
      end < page.total ? el("a", { href: tablesHref({ offset: String(end) }), rel: "next" }, "next →") : null);
    const exportQuery = new URLSearchParams(q);
    exportQuery.delete("offset"); exportQuery.delete("limit"); exportQuery.delete("facet");
    const exportPath = (format) => `${base}/${encodeURIComponent(name)}?${exportQuery}&format=${format}`;
    const where = filters.map((f) => `"${f.column}" ${sqlOp(f)}`).join(" AND ");
    const asSql = `SELECT * FROM "${name}"${where ? ` WHERE ${where}` : ""}${page.order ? ` ORDER BY "${page.order}"${page.desc ? " DESC" : ""}` : ""} LIMIT 100`;
    show(el("h1", {}, `${name} `, el("span", { class: "muted" }, slug)),
      filterForm(page.columns, filters),
      facetPanel(page, facets),
      el("div", { class: "table-tools" }, nav,
        el("span", { class: "exports" }, "export ", exportLink(exportPath("csv"), "CSV", `${name}.csv`), " ",
          exportLink(exportPath("rows"), "JSON", `${name}.json`), " ",
          el("a", { href: `#/tables?ctx=${encodeURIComponent(slug)}&sql=${encodeURIComponent(asSql)}` }, "as SQL"))),
      resultTable(slug, page.columns, page.rows, head));
  } catch (error) {
    showError(show, error);
  }
}

function sqlOp(f) {
  const value = /^-?\d+(\.\d+)?$/.test(f.value) ? f.value : `'${f.value.replaceAll("'", "''")}'`;
  const ops = { exact: `= ${value}`, not: `!= ${value}`, gt: `> ${value}`, gte: `>= ${value}`, lt: `< ${value}`,
    lte: `<= ${value}`, isnull: "IS NULL", notnull: "IS NOT NULL",
    contains: `LIKE '%${f.value.replaceAll("'", "''")}%'`, startswith: `LIKE '${f.value.replaceAll("'", "''")}%'` };
  return ops[f.op];
}

// One row per filter (column, operator, value), a row to add, and Apply: the URL is the state.
function filterForm(columns, filters) {
  const rows = el("div", { class: "filter-rows" });
  const addRow = (f = { column: columns.find((c) => !c.startsWith("_")) || columns[0], op: "exact", value: "" }) => {
    const n = rows.children.length + 1;
    const column = el("select", { "aria-label": `filter ${n}: column`, class: "f-column" },
      columns.map((c) => el("option", { value: c, selected: c === f.column }, c)));
    const op = el("select", { "aria-label": `filter ${n}: comparison`, class: "f-op" },
      OPS.map(([o, label]) => el("option", { value: o, selected: o === f.op }, label)));
    const value = el("input", { "aria-label": `filter ${n}: value`, class: "f-value", value: f.value, maxlength: 1000 });
    const sync = () => { value.hidden = NO_VALUE.has(op.value); };
    op.addEventListener("change", sync);
    sync();
    const remove = el("button", { type: "button", class: "small", "aria-label": `remove filter ${n}`,
      onclick: () => { line.remove(); } }, "×");
    const line = el("div", { class: "filter" }, column, op, value, remove);
    rows.append(line);
  };
  for (const f of filters) addRow(f);
  if (!filters.length) addRow();
  const apply = (event) => {
    event.preventDefault();
    const q = new URLSearchParams(location.hash.split("?")[1] || "");
    for (const key of [...q.keys()]) if (!RESERVED.has(key)) q.delete(key);
    q.set("offset", "0");
    for (const line of rows.querySelectorAll(".filter")) {
      const f = { column: line.querySelector(".f-column").value, op: line.querySelector(".f-op").value,
        value: line.querySelector(".f-value").value };
      if (!f.value && !NO_VALUE.has(f.op)) continue;
      q.append(filterKey(f), NO_VALUE.has(f.op) ? "1" : f.value);
    }
    location.hash = `#/tables?${q}`;
  };
  return el("form", { class: "filters", onsubmit: apply, "aria-label": "Filters" }, rows,
    el("div", { class: "filter-actions" },
      el("button", { type: "button", class: "small", onclick: () => addRow() }, "+ filter"), " ",
      el("button", { type: "submit" }, "Apply"), " ",
      filters.length ? el("a", { href: tablesHref(Object.fromEntries(filters.map((f) => [filterKey(f), null]))) }, "clear filters") : null));
}

// Facets: a column's most frequent values under the filters, each a link that filters by it.
function facetPanel(page, facets) {
  const choose = el("select", { "aria-label": "Facet by", onchange: (e) => {
    if (!e.currentTarget.value) return;
    const q = new URLSearchParams(location.hash.split("?")[1] || "");
    q.append("facet", e.currentTarget.value);
    location.hash = `#/tables?${q}`;
  } }, el("option", { value: "" }, "facet by…"),
  page.columns.filter((c) => !facets.includes(c)).map((c) => el("option", { value: c }, c)));
  const boxes = (page.facets || []).map((f) => {
    const drop = new URLSearchParams(location.hash.split("?")[1] || "");
    const kept = drop.getAll("facet").filter((c) => c !== f.column);
    drop.delete("facet");
    for (const c of kept) drop.append("facet", c);
    return el("section", { class: "facet", "aria-label": `facet ${f.column}` },
      el("h2", {}, f.column, " ", el("a", { href: `#/tables?${drop}`, "aria-label": `close facet ${f.column}`, class: "muted" }, "×")),
      el("ul", {}, f.values.map((v) => el("li", {},
        el("a", { href: tablesHref(v.value === null ? { [`${f.column}__isnull`]: "1", offset: "0" }
          : { [f.column]: String(v.value), offset: "0" }) },
          v.value === null ? "(empty)" : String(v.value).slice(0, 80)),
        el("span", { class: "muted" }, ` ${v.count.toLocaleString()}`)))),
      f.truncated ? el("p", { class: "muted small" }, "more values not shown") : null);
  });
  return el("div", { class: "facets" }, el("div", {}, choose), ...boxes);
}
