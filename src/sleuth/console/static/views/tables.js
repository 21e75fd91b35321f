import { api, showError } from "../lib/api.js";
import { el, params, screen } from "../lib/dom.js";

export async function tablesView() {
  const show = screen();
  const p = params();
  const slug = p.get("ctx"), name = p.get("t");
  const base = `/contexts/${encodeURIComponent(slug)}/tables`;
  const link = (changes) => {
    const q = new URLSearchParams({ ctx: slug, t: name, offset: p.get("offset") || "0" });
    if (p.get("order")) q.set("order", p.get("order"));
    if (p.get("desc")) q.set("desc", p.get("desc"));
    for (const [k, v] of Object.entries(changes)) q.set(k, v);
    return `#/tables?${q}`;
  };
  try {
    if (!name) {
      const data = await (await api(base)).json();
      show(el("h1", {}, `Tables · ${slug}`), el("ul", { class: "listing" }, data.tables.map((t) =>
        el("li", {}, el("a", { href: `#/tables?ctx=${encodeURIComponent(slug)}&t=${encodeURIComponent(t.name)}` }, t.name),
          el("span", { class: "muted" }, ` ${t.rows} rows · ${t.columns.map((c) => c.name).join(", ")}`)))));
      return;
    }
    const q = new URLSearchParams({ offset: p.get("offset") || "0", limit: "25" });
    if (p.get("order")) q.set("order", p.get("order"));
    if (p.get("desc")) q.set("desc", p.get("desc"));
    const page = await (await api(`${base}/${encodeURIComponent(name)}?${q}`)).json();
    const head = page.columns.map((c) => {
      const sorted = page.order === c;
      const next = sorted && !page.desc ? "true" : "false";
      return el("th", { "aria-sort": sorted ? (page.desc ? "descending" : "ascending") : "none" },
        el("a", { href: link({ order: c, desc: next, offset: "0" }) }, c, sorted ? (page.desc ? " ▼" : " ▲") : ""));
    });
    const rows = page.rows.map((r) => el("tr", {}, r.map((v) => el("td", {}, v === null ? "" : String(v)))));
    const end = Math.min(page.offset + page.limit, page.total);
    const nav = el("nav", { class: "pager", "aria-label": "Rows" },
      page.offset > 0 ? el("a", { href: link({ offset: String(Math.max(0, page.offset - page.limit)) }), rel: "prev" }, "← previous") : null,
      ` rows ${page.total ? page.offset + 1 : 0}–${end} of ${page.total} `,
      end < page.total ? el("a", { href: link({ offset: String(end) }), rel: "next" }, "next →") : null);
    show(el("h1", {}, `${name} `, el("span", { class: "muted" }, slug)), nav,
      el("div", { class: "scroll" }, el("table", { class: "grid" }, el("thead", {}, el("tr", {}, head)), el("tbody", {}, rows))));
  } catch (error) {
    showError(show, error);
  }
}
