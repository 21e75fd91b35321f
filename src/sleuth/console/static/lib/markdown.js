// Markdown as DOM nodes: marked's lexer (vendor/, CommonMark + GFM tables) reads the grammar, and
// every token becomes an element built with `el`, its text inserted as text. Raw HTML in a document
// is shown as the text it is, images as their alt text (nothing is fetched), and a link keeps only
// an http(s), mailto or in-console (#…) target: a document is hostile until proven otherwise.

import { Lexer } from "../vendor/marked.esm.js";
import { el } from "./dom.js";

const SAFE_LINK = /^(https?:|mailto:|#)/i;

function inline(tokens = []) {
  return tokens.map((t) => {
    switch (t.type) {
      case "strong": return el("strong", {}, inline(t.tokens));
      case "em": return el("em", {}, inline(t.tokens));
      case "del": return el("del", {}, inline(t.tokens));
      case "codespan": return el("code", {}, t.text);
      case "br": return el("br");
      case "link": {
        const external = /^(https?:|mailto:)/i.test(t.href);
        return SAFE_LINK.test(t.href)
          ? el("a", { href: t.href, title: t.title || null, rel: external ? "noopener noreferrer" : null,
            target: external ? "_blank" : null }, inline(t.tokens))
          : el("span", {}, inline(t.tokens));
      }
      case "image": return el("span", { class: "muted" }, `[image: ${t.text || t.href}]`);
      case "text": return t.tokens ? inline(t.tokens) : t.text;
      default: return t.text ?? t.raw ?? "";  // escape, html (as text), anything newer
    }
  });
}

function block(t, depth) {
  switch (t.type) {
    case "heading": return el(`h${Math.min(6, t.depth + depth)}`, {}, inline(t.tokens));
    case "paragraph": return el("p", {}, inline(t.tokens));
    case "text": return el("p", {}, t.tokens ? inline(t.tokens) : t.text);
    case "code": return el("pre", {}, el("code", {}, t.text));
    case "blockquote": return el("blockquote", {}, blocks(t.tokens, depth));
    case "hr": return el("hr");
    case "list": return el(t.ordered ? "ol" : "ul", { start: t.ordered && t.start !== 1 ? t.start : null },
      t.items.map((item) => el("li", {},
        item.task ? el("input", { type: "checkbox", checked: item.checked, disabled: true }) : null,
        item.task ? " " : null,
        // a tight list's items are inline text, not paragraphs
        item.loose ? blocks(item.tokens, depth) : item.tokens.map((x) => (x.type === "text" ? inline(x.tokens || [x]) : block(x, depth))))));
    case "table": return el("div", { class: "scroll", tabindex: "0" }, el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, t.header.map((c) => el("th", { class: c.align ? `align-${c.align}` : null }, inline(c.tokens))))),
      el("tbody", {}, t.rows.map((row) => el("tr", {}, row.map((c) => el("td", {}, inline(c.tokens))))))));
    case "html": return el("pre", { class: "html-as-text" }, t.text);
    case "space": case "def": return null;
    default: return t.raw ? el("p", {}, t.raw) : null;
  }
}

function blocks(tokens, depth) {
  return tokens.map((t) => block(t, depth)).filter(Boolean);
}

// `text` rendered as an <article>; a heading `# X` becomes <h(1 + shift)>, below the view's own <h1>.
export function markdown(text, { shift = 1 } = {}) {
  return el("article", { class: "markdown" }, blocks(Lexer.lex(text || "", { gfm: true }), shift));
}
