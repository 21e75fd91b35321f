// The page viewer: one page of a source as the version stored it, a span of it highlighted (a
// citation's, a chunk's, an artifact's quote), and beside it what the version made of the page: the
// chunks cut from it and the artifacts that cite it. A PDF page is its real image with the span boxed
// from the text layer (boxes computed by the server); other formats show the page text.

import { api, showError } from "../lib/api.js";
import { el, encodePath, knowledgeHref, pageHref, params, screen } from "../lib/dom.js";

// The page text with the span in one <mark> and a marker where each chunk starts. Markers show their
// number through CSS (::before), so the marked element's text is exactly the span.
function markedText(text, chunks, start, end) {
  // Offsets count code points (the server's strings); a JS string counts UTF-16 units.
  const chars = Array.from(text);
  const slice = (a, b) => chars.slice(a, b).join("");
  const starts = new Map();
  chunks.forEach((c, i) => starts.set(c.start, [...(starts.get(c.start) || []), i + 1]));
  const span = validSpan(start, end, chars.length);
  const cuts = [...new Set([0, ...starts.keys(), ...(span ? [start, end] : [])])]
    .filter((x) => x >= 0 && x < chars.length).sort((a, b) => a - b);
  const out = el("pre", { class: "page-text" });
  let into = out;
  cuts.forEach((at, i) => {
    if (span && at === end) into = out;
    if (span && at === start) {
      into = el("mark", { id: "span" });
      out.append(into);
    }
    for (const n of starts.get(at) || []) {
      into.append(el("span", { class: "chunk-start", dataset: { n: `¶${n}` }, title: chunks[n - 1].id }));
    }
    into.append(slice(at, cuts[i + 1] ?? chars.length));
  });
  return out;
}

// A span to mark: within the page and not empty (a link can carry anything).
function validSpan(start, end, length) {
  return Number.isInteger(start) && Number.isInteger(end) && 0 <= start && start < end && end <= length;
}

function marksPanel(ctx, path, page, info, start, end) {
  const current = (s) => s.start === start && s.end === end;
  const chunks = info.chunks.map((c, i) => el("li", {},
    el("a", { href: pageHref({ ctx, path, page, start: c.start, end: c.end }), "aria-current": current(c) ? "true" : null },
      `¶${i + 1} · ${c.start}–${c.end}`),
    el("span", { class: "muted" }, ` ${c.tokens} tokens${c.section_path.length ? " · " + c.section_path.join(" › ") : ""}`)));
  const artifacts = info.artifacts.map((a) => el("li", {},
    el("a", { href: knowledgeHref({ ctx, path: a.file, file: true }) },
      `${a.type} · ${a.name}`), " ",
    el("a", { href: pageHref({ ctx, path, page, start: a.start, end: a.end }), class: "muted", "aria-current": current(a) ? "true" : null,
      "aria-label": `mark the quote of ${a.name}` }, `${a.start}–${a.end}`)));
  return el("aside", { class: "marks", "aria-label": "On this page" },
    el("h2", {}, `Chunks (${chunks.length})`), chunks.length ? el("ol", { class: "chunks" }, chunks) : el("p", { class: "muted" }, "none"),
    el("h2", {}, `Artifacts citing this page (${artifacts.length})`),
    artifacts.length ? el("ul", { class: "artifacts" }, artifacts) : el("p", { class: "muted" }, "none"));
}

// One resize handler for the page image shown now (a listener per visit would pile up).
let placeBoxes = null;
addEventListener("resize", () => placeBoxes?.());

// Bring the marked span into view: within `scroller` only (the ask view's panel: the answer beside
// it must not move), or the page itself.
function reveal(target, scroller) {
  if (!target) return;
  if (!scroller) {
    target.scrollIntoView({ block: "center" });
    return;
  }
  const offset = target.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
  scroller.scrollTop += offset - scroller.clientHeight / 3;
}

async function pdfPage(body, base, path, page, start, end, scroller) {
  // Fetched, not linked: an <img src> could not carry the login token.
  const png = await (await api(`${base}/image?page=${page}&width=1400`, { headers: { accept: "image/png" } })).blob();
  const url = URL.createObjectURL(png);
  const image = el("img", { src: url, alt: `${path}, page ${page}` });
  image.addEventListener("load", () => URL.revokeObjectURL(url), { once: true });
  const frame = el("div", { class: "page-image" }, image);
  // On a phone the page fits the screen and its print is too small to read: a zoom to twice the
  // width scrolls inside its own box, the boxed span brought into view.
  const zoom = el("button", { type: "button", class: "small zoom", "aria-pressed": "false" }, "Zoom");
  const pane = el("div", { class: "page-scroll" }, frame);
  body.replaceChildren(el("div", { class: "page-tools" }, zoom), pane);
  zoom.addEventListener("click", () => {
    const on = frame.classList.toggle("zoomed");
    zoom.setAttribute("aria-pressed", String(on));
    placeBoxes?.();
    frame.querySelector(".box")?.scrollIntoView({ block: "center", inline: "center" });
  });
  placeBoxes = null;
  if (start === null || end === null) return;
  const note = el("p", { class: "grounding" });
  body.append(note);
  let boxes;
  try {  // a span the boxes cannot be found for leaves the page shown, with the reason
    boxes = await (await api(`${base}/boxes?page=${page}&start=${start}&end=${end}`)).json();
  } catch (error) {
    showError(note, error);
    return;
  }
  const place = () => {
    frame.querySelectorAll(".box").forEach((b) => b.remove());
    const scale = image.clientWidth / boxes.width;
    for (const b of boxes.boxes) {
      const box = el("div", { class: "box", dataset: { text: boxes.text } });
      Object.assign(box.style, { left: `${b.x * scale}px`, top: `${b.y * scale}px`,  // CSSOM: allowed by the CSP
        width: `${b.width * scale}px`, height: `${b.height * scale}px` });
      frame.append(box);
    }
  };
  placeBoxes = place;
  const first = () => {
    place();
    reveal(frame.querySelector(".box"), scroller);
  };
  if (image.complete) first(); else image.addEventListener("load", first, { once: true });
  note.replaceChildren(el("q", { id: "span" }, boxes.text),
    boxes.current ? "" : el("span", { class: "error" }, " (the file changed since this version: no boxes)"));
}

// One page of a source into `body`, its span (if any) marked: the PDF's page image with the span
// boxed, or the page text with the span in a <mark>. The page viewer and the ask view's source panel
// both show pages this way, the span brought into view (within `scroller` when given). Returns the
// page's record (text, chunks, artifacts, page count).
export async function showSourcePage(body, { ctx, path, page, start = null, end = null }, scroller = null) {
  const base = `/contexts/${encodeURIComponent(ctx)}/pages/${encodePath(path)}`;
  const info = await (await api(`${base}?page=${page}`)).json();
  const span = validSpan(start, end, Array.from(info.text).length) ? [start, end] : [null, null];
  if (info.pdf) {
    await pdfPage(body, base, path, page, ...span, scroller);
  } else {
    body.replaceChildren(markedText(info.text, info.chunks, ...span));
    reveal(body.querySelector("#span"), scroller);
  }
  return info;
}

export async function pageView() {
  const show = screen();
  const p = params();
  const ctx = p.get("ctx"), path = p.get("path");
  const page = Number(p.get("page") || 1);
  const start = p.has("start") ? Number(p.get("start")) : null;
  const end = p.has("end") ? Number(p.get("end")) : null;
  const title = el("span", { class: "muted" }, ` · page ${page}`);
  const pages = el("nav", { "aria-label": "Pages" });
  const head = el("header", { class: "viewer-head" }, el("h1", {}, el("span", { class: "path" }, path), title), pages);
  const body = el("div", { class: "page" }, el("p", { class: "muted" }, "Loading…"));
  const layout = el("div", { class: "viewer" }, body);
  show(head, layout);
  try {
    const info = await showSourcePage(body, { ctx, path, page, start, end });
    title.textContent = ` · page ${page} of ${info.pages}${info.label && info.label !== String(page) ? ` (printed “${info.label}”)` : ""}`;
    pages.replaceChildren(
      page > 1 ? el("a", { href: pageHref({ ctx, path, page: page - 1 }), rel: "prev" }, "← previous") : "", " ",
      page < info.pages ? el("a", { href: pageHref({ ctx, path, page: page + 1 }), rel: "next" }, "next →") : "");
    layout.append(marksPanel(ctx, path, page, info, start, end));
  } catch (error) {
    showError(body, error);
  }
}
