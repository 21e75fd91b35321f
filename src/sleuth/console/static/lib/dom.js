// DOM helpers every view shares: elements built from data (text always as text, never HTML), the
// route's query parameters, and a tree path as URL segments.

export const view = document.getElementById("view");

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
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
