// An answer with its citation markers: hover or focus shows file, page and the verbatim span; a
// click opens the page viewer.

import { el, pageHref } from "./dom.js";

const popover = document.getElementById("popover");

export function citationHref(c) {
  return pageHref({ ctx: c.context, path: c.source, page: c.pages[0] ?? 1, start: c.start, end: c.end });
}

export function renderJson(target, query) {
  if (query.output_json) {
    target.append(el("h2", {}, "JSON"), el("pre", { class: "json" }, JSON.stringify(query.output_json, null, 2)));
  }
}

// A plain click on a citation (no modifier key: those still open the page viewer in a new tab) calls
// `open(n, link)` when the view shows sources beside the answer (the link clicked: the view keeps it
// in view).
function opener(open, n) {
  if (!open) return undefined;
  return (event) => {
    if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    hideCitation();
    open(n, event.currentTarget);
  };
}

export function renderAnswer(target, query, { open = null } = {}) {
  const text = (query.output || []).flatMap((m) => m.content || []).map((p) => p.text || "").join("");
  const citations = query.citations || [];
  const answer = el("div", { class: "answer" });
  const withMarkers = (into, piece) => {
    let last = 0;
    for (const match of piece.matchAll(/\[(\d+)\]/g)) {
      into.append(piece.slice(last, match.index));
      const citation = citations[Number(match[1]) - 1];
      if (citation) {
        into.append(el("a", {
          class: "cite", href: citationHref(citation), dataset: { n: match[1] },
          "aria-label": `citation ${match[1]}: ${citation.source}, page ${citation.pages.join(", ")}`,
          onmouseenter: (e) => showCitation(e.currentTarget, citation),
          onfocus: (e) => showCitation(e.currentTarget, citation),
          onmouseleave: hideCitation, onblur: hideCitation, onclick: opener(open, Number(match[1])),
        }, match[0]));
      } else {
        into.append(match[0]);
      }
      last = match.index + match[0].length;
    }
    into.append(piece.slice(last));
  };
  // A sentence whose facts what it cites does not state is marked where it stands (issue 46).
  const flagged = (query.unsupported || []).filter((u) => u.text && Number.isInteger(u.start) && Number.isInteger(u.end))
    .sort((a, b) => a.start - b.start);
  let at = 0;
  for (const flag of flagged) {
    if (flag.start < at || flag.end > text.length) continue;
    withMarkers(answer, text.slice(at, flag.start));
    const mark = el("mark", { class: "unsupported", title: unsupportedSaid(flag) });
    withMarkers(mark, text.slice(flag.start, flag.end));
    answer.append(mark);
    at = flag.end;
  }
  withMarkers(answer, text.slice(at));
  const unsupported = (query.unsupported || []).length
    ? el("div", { class: "unsupported-list", role: "note" }, el("strong", {}, "Not in the cited evidence:"),
      el("ul", {}, query.unsupported.map((u) => el("li", {}, unsupportedSaid(u)))))
    : null;
  // Over several contexts a citation names its context: two contexts may hold files of one name.
  const many = new Set(citations.map((c) => c.context).filter(Boolean)).size > 1;
  const list = el("ol", { class: "citations" }, citations.map((c, i) =>
    el("li", {}, many && c.context ? el("span", { class: "badge" }, c.context) : null, many ? " " : null,
      el("a", { href: citationHref(c), dataset: { n: i + 1 }, onclick: opener(open, i + 1) },
        `${c.source}, p. ${c.pages.join(", ")}`), " ",
      said(c))));
  const sure = ASSURANCES[query.synthesis?.assurance];
  const assurance = sure ? el("p", { class: `assurance ${query.synthesis.assurance}` }, el("strong", {}, "How sure: "), sure) : null;
  target.replaceChildren(el("h2", {}, "Answer"), answer, ...(unsupported ? [unsupported] : []),
    ...(assurance ? [assurance] : []), ...(citations.length ? [list] : []));
}

// "“…5 days a week.” states 5, which what it cites does not" (the query's `unsupported`).
function unsupportedSaid(flag) {
  const missing = (flag.missing || []).join(", ");
  const what = flag.field ? `field ${flag.field}` : `“${(flag.text || "").trim()}”`;
  return flag.reason === "uncited"
    ? `${what} states ${missing} and cites nothing that does`
    : `${what} states ${missing}, which what it cites does not`;
}

// How an answer without a model says how sure it is (the query's `synthesis.assurance`).
const ASSURANCES = {
  matched: "the figure is the table cell whose row and period are the asked ones",
  computed: "worked out from the cited figures",
  section: "the section the question names, in its own headings and words",
  nearest: "not the asked figure: the nearest evidence found",
  none: "nothing found that answers it",
};

// A table cell's citation reads as its row, period and figure ("Revenue, 2025: 48.2"); prose as its quote.
function said(citation) {
  return citation.cell ? el("span", { class: "cell" }, citation.cell) : el("q", {}, citation.grounding);
}

export function showCitation(anchor, citation) {
  const where = `${citation.context ? `${citation.context} · ` : ""}${citation.source} · page ${citation.pages.join(", ")}`;
  popover.replaceChildren(el("div", { class: "where" }, where), said(citation));
  const box = anchor.getBoundingClientRect();
  popover.style.left = `${Math.max(8, Math.min(box.left, innerWidth - 360))}px`;
  popover.style.top = `${box.bottom + scrollY + 6}px`;
  popover.hidden = false;
  anchor.setAttribute("aria-describedby", "popover");  // read out with the marker while it is shown
}

export function hideCitation() {
  popover.hidden = true;
  document.querySelectorAll("[aria-describedby=popover]").forEach((a) => a.removeAttribute("aria-describedby"));
}
