// DOM helpers every view shares: elements built from data (text always as text, never HTML), the
// route's query parameters, a tree path as URL segments, links to the page viewer.

export const view = document.getElementById("view");

// Each route is a generation: a view fills the page through the `show` it took when it started, so a
// slow answer for a view the person has left never replaces the one they went to.
let generation = 0;

// A view that follows some changes of its own URL in place (the ask view's source panel opened,
// switched or closed by a link, Back or Forward) registers how; the router asks it first and renders
// the view again only when it answers false. A new route forgets it.
let inPlace = null;

export function followInPlace(update) {
  inPlace = update;
}

export function followedInPlace() {
  return Boolean(inPlace?.());
}

export function newRoute() {
  generation += 1;
  inPlace = null;
}

export function screen() {
  const mine = generation;
  const show = (...nodes) => {
    if (mine !== generation) return false;
    view.replaceChildren(...nodes);
    return true;
  };
  // A view names its tab and history entry more precisely once it knows more (a context's name).
  show.title = (...parts) => {
    if (mine === generation) titled(...parts);
  };
  return show;
}

// The tab's and the history entry's title: the most specific part first, then where it is, then
// Sleuth ("Tables · acme · Sleuth"). Empty parts are left out.
export function titled(...parts) {
  document.title = [...parts.filter(Boolean), "Sleuth"].join(" · ");
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function params() {
  const [, query = ""] = location.hash.split("?");
  return new URLSearchParams(query);
}

// A path of the source or knowledge tree as URL segments (each one encoded, the slashes kept).
export function encodePath(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

// The page viewer's link for a span of a source's page (a citation, a chunk, a quote) or a whole page.
export function pageHref({ ctx, path, page, start = null, end = null }) {
  const q = new URLSearchParams({ ctx, path, page: String(page ?? 1) });
  if (start !== null && start !== undefined && end !== null && end !== undefined) {
    q.set("start", String(start));
    q.set("end", String(end));
  }
  return `#/page?${q}`;
}

// The knowledge browser's link for a folder (the root when `path` is empty) or, with `file`, a file.
export function knowledgeHref({ ctx, path = "", file = false }) {
  const q = new URLSearchParams({ ctx });
  if (path) q.set("path", path);
  if (file) q.set("file", "1");
  return `#/knowledge?${q}`;
}

// An ISO timestamp as a person reads it: to the minute, in UTC.
export function when(iso) {
  return iso ? `${iso.replace("T", " ").slice(0, 16)} UTC` : "—";
}

// A table that reads as one card per row on a phone: each cell is labelled with its column's header.
export function stacked(table) {
  const headers = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      cell.dataset.label = headers[i] ?? "";
      if (cell.childNodes.length > 1) cell.replaceChildren(el("div", {}, ...cell.childNodes));  // one grid cell
    });
  }
  table.classList.add("stack");
  return table;
}

// A byte count as a person reads it: 812 B, 14.2 KB, 3.1 MB.
export function bytes(n) {
  if (!Number.isFinite(n)) return "";
  const units = ["B", "KB", "MB", "GB"];
  let value = n, unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return `${unit ? value.toFixed(value < 10 ? 1 : 0) : value} ${units[unit]}`;
}

// A context's slug as derived from the name a person types: lowercase ASCII, hyphens between words,
// starting with a letter, at most 64 characters ("Employee Handbook 2025" → employee-handbook-2025).
// The server still checks it (POST /contexts, /fork).
export function slugOf(name) {
  return name.normalize("NFKD").replace(/[\u0300-\u036f]/g, "").toLowerCase()
    .replace(/[^a-z0-9]+/g, "-").replace(/^[^a-z]+/, "").slice(0, 64).replace(/-+$/, "");
}

// A slug field that follows a name field as the person types, until they edit the slug themselves
// (emptying it hands it back to the name).
export function slugFollows(name, slug) {
  let edited = false;
  slug.addEventListener("input", () => { edited = slug.value !== ""; });
  name.addEventListener("input", () => { if (!edited) slug.value = slugOf(name.value); });
}

// What a context's slug looks like, for the browser to say before sending (the server has the last
// word: it also refuses a slug ending in a hyphen, with its own sentence).
export const SLUG_PATTERN = "[a-z][a-z0-9\\-]{2,63}";
export const SLUG_RULE = "lowercase letters, digits and hyphens, starting with a letter (3 to 64)";
