import { api, showError } from "../lib/api.js";
import { el, params, screen, stacked, when } from "../lib/dom.js";
import { turnsTable } from "../lib/turns.js";

export async function sessionsView() {
  const show = screen();
  const id = params().get("s");
  try {
    if (!id) {
      const data = await (await api("/sessions?limit=50")).json();
      show(el("h1", {}, "Sessions"), stacked(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["session", "title", "updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, data.sessions.map((x) => el("tr", {},
          el("td", {}, el("a", { href: `#/sessions?s=${encodeURIComponent(x.id)}` }, x.id)),
          el("td", {}, x.title || ""), el("td", {}, when(x.updated_at))))))));
      return;
    }
    const session = await (await api(`/sessions/${encodeURIComponent(id)}`)).json();
    show(el("h1", {}, "Session ", el("span", { class: "muted" }, id)),
      session.system_prompt ? el("p", {}, el("strong", {}, "Instructions: "), session.system_prompt) : "",
      el("p", {}, el("a", { href: `#/ask?s=${encodeURIComponent(id)}` }, "Continue this session")),
      turnsTable(session.queries));
  } catch (error) {
    showError(show, error);
  }
}
