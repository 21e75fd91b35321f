import { api, showError } from "../lib/api.js";
import { el, encodePath, params, view } from "../lib/dom.js";

export async function pageView() {
  const p = params();
  const ctx = p.get("ctx"), path = p.get("path");
  const page = Number(p.get("page") || 1);
  const start = p.has("start") ? Number(p.get("start")) : null;
  const end = p.has("end") ? Number(p.get("end")) : null;
  const base = `/contexts/${encodeURIComponent(ctx)}/pages/${encodePath(path)}`;
  const nav = (n) => {
    const q = new URLSearchParams({ ctx, path, page: String(n) });
    return `#/page?${q}`;
  };
  const head = el("header", { class: "viewer-head" },
    el("h1", {}, path, el("span", { class: "muted" }, ` · page ${page}`)),
    el("nav", { "aria-label": "Pages" },
      page > 1 ? el("a", { href: nav(page - 1), rel: "prev" }, "← previous") : null, " ",
      el("a", { href: nav(page + 1), rel: "next" }, "next →")));
  const body = el("div", { class: "page" }, el("p", { class: "muted" }, "Loading…"));
  view.replaceChildren(head, body);
  try {
    const info = await (await api(`${base}?page=${page}`)).json();
    if (!info.pdf) {
      const text = info.text;
      const marked = start !== null && end !== null
        ? [text.slice(0, start), el("mark", { id: "span" }, text.slice(start, end)), text.slice(end)]
        : [text];
      body.replaceChildren(el("pre", { class: "page-text" }, marked));
    } else {
      // Fetched, not linked: an <img src> could not carry the login token.
      const png = await (await api(`${base}/image?page=${page}&width=1000`, { headers: { accept: "image/png" } })).blob();
      const image = el("img", { src: URL.createObjectURL(png), alt: `${path}, page ${page}` });
      const frame = el("div", { class: "page-image" }, image);
      body.replaceChildren(frame);
      if (start !== null && end !== null) {
        const boxes = await (await api(`${base}/boxes?page=${page}&start=${start}&end=${end}`)).json();
        const place = () => {
          frame.querySelectorAll(".box").forEach((b) => b.remove());
          const scale = image.clientWidth / boxes.width;
          for (const b of boxes.boxes) {
            frame.append(el("div", { class: "box", dataset: { text: boxes.text },
              style: `left:${b.x * scale}px;top:${b.y * scale}px;width:${b.width * scale}px;height:${b.height * scale}px` }));
          }
        };
        if (image.complete) place(); else image.addEventListener("load", place);
        addEventListener("resize", place);
        body.append(el("p", { class: "grounding" }, el("q", { id: "span" }, boxes.text)));
      }
    }
    document.getElementById("span")?.scrollIntoView({ block: "center" });
  } catch (error) {
    showError(body, error);
  }
}
