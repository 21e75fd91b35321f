// The Sleuth console: hash routes over the /api of the server that serves it, one module per view
// (views/), the helpers they share in lib/. No build step: the browser loads these files as they are.
//   #/                                     contexts          #/context?ctx=     one context
//   #/design?ctx=                          the manifest      #/knowledge?ctx=   artifacts, rosters
//   #/tables?ctx=[&t=]                     SQL tables        #/ask?ctx=a,b      ask, steps live
//   #/page?ctx=&path=&page=[&start=&end=]  the page viewer (shareable)
//   #/trace?q=   #/compare?q=   #/sessions[?s=]
// Everything shown comes from the API's JSON; text is always inserted as text, never as HTML.

import { hideCitation } from "./lib/answer.js";
import { showWho } from "./lib/who.js";
import { followedInPlace, newRoute, params, titled, view } from "./lib/dom.js";
import { askView } from "./views/ask.js";
import { compareView } from "./views/compare.js";
import { contextView } from "./views/context.js";
import { contextsView } from "./views/contexts.js";
import { designView } from "./views/design.js";
import { knowledgeView } from "./views/knowledge.js";
import { pageView } from "./views/page.js";
import { sessionsView } from "./views/sessions.js";
import { signInView } from "./views/signin.js";
import { tablesView } from "./views/tables.js";
import { traceView } from "./views/trace.js";

// Each view's tab and history-entry title, from its route: what it shows first, then the context
// it is in ("Tables · acme · Sleuth", "acme · Ask · Sleuth"). A view may name it more precisely once
// it has loaded (a context's view shows the context's name).
function titleOf(name) {
  const q = params();
  const ctx = q.get("ctx") || "";
  const last = (path) => (path || "").split("/").filter(Boolean).pop() || "";
  switch (name) {
    case "#/ask": return [ctx.split(",").filter(Boolean).join(", "), "Ask"];
    case "#/page": return [`${last(q.get("path"))} p. ${q.get("page") || 1}`, ctx];
    case "#/trace": return [`Trace ${q.get("q") || ""}`.trim()];
    case "#/compare": return ["Comparison"];
    case "#/context": return [ctx];
    case "#/knowledge": return [last(q.get("path")), "Knowledge", ctx];
    case "#/design": return ["Design", ctx];
    case "#/sessions": return [q.get("s") ? `Session ${q.get("s")}` : "Sessions"];
    case "#/tables": return [q.get("t"), "Tables", ctx];
    default: return ["Contexts"];
  }
}

function route() {
  if (followedInPlace()) return;  // the view shown took the change itself (a side panel)
  newRoute();
  hideCitation();
  view.focus({ preventScroll: true });  // a new view: keyboard and screen-reader focus start at its top
  const name = location.hash.split("?")[0];
  titled(...titleOf(name));
  if (name === "#/ask") return askView();
  if (name === "#/page") return pageView();
  if (name === "#/trace") return traceView();
  if (name === "#/compare") return compareView();
  if (name === "#/context") return contextView();
  if (name === "#/knowledge") return knowledgeView();
  if (name === "#/design") return designView();
  if (name === "#/sessions") return sessionsView();
  if (name === "#/tables") return tablesView();
  return contextsView();
}

addEventListener("hashchange", route);
addEventListener("keydown", (e) => { if (e.key === "Escape") hideCitation(); });
addEventListener("sleuth:sign-in", () => {
  showWho();
  signInView(() => { showWho(); route(); });
});
showWho();
route();
