import { api, showError, TERMINAL } from "../lib/api.js";
import { citationHref, renderAnswer, renderJson } from "../lib/answer.js";
import { callLine } from "../lib/calls.js";
import { el, followInPlace, params, screen } from "../lib/dom.js";
import { turnsTable } from "../lib/turns.js";
import { showSourcePage } from "./page.js";

// The source beside the answer: a citation opens its page in a panel next to the thread (over it on
// a phone), the span boxed on the PDF image or marked in the text, so the answer stays in view. The
// panel is part of the URL (`&cite=N`): Back closes it, Forward opens it again, a link shares it.
function sourcePanel(onClose) {
  const node = el("aside", { class: "source-panel", "aria-label": "Source", tabindex: "-1", hidden: true });
  node.addEventListener("keydown", (e) => { if (e.key === "Escape") onClose(); });
  let showing = 0;  // the latest citation asked for: a slower page for an earlier one is dropped
  return {
    node,
    async show(citation, n) {
      const mine = ++showing;
      const page = citation.pages[0] ?? 1;
      const body = el("div", { class: "page" }, el("p", { class: "muted" }, "Loading…"));
      node.replaceChildren(
        el("div", { class: "source-head" },
          el("h2", {}, `[${n}] `, citation.context ? el("span", { class: "badge" }, citation.context) : null,
            citation.context ? " " : null, el("span", { class: "path" }, citation.source),
            el("span", { class: "muted where" }, ` · page ${citation.pages.join(", ")}`)),
          el("a", { href: citationHref(citation), class: "small" }, "open in the page viewer"),
          el("button", { type: "button", class: "small close", "aria-label": "Close the source", onclick: onClose }, "×")),
        body);
      node.hidden = false;
      node.focus({ preventScroll: true });
      try {
        const info = await showSourcePage(body, { ctx: citation.context, path: citation.source, page,
          start: citation.start, end: citation.end }, node);
        if (mine === showing && info.label && info.label !== String(page)) {
          node.querySelector(".source-head .where").append(` (printed “${info.label}”)`);
        }
      } catch (error) {
        if (mine === showing) showError(body, error);
      }
    },
    hide() {
      showing += 1;
      node.hidden = true;
      node.replaceChildren();
    },
  };
}

// This entry's URL parameters but the panel's, as one key: a change of only `cite` is the panel's.
function threadKey() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  q.delete("cite");
  q.sort();
  return `${location.hash.split("?")[0]}?${q}`;
}

function stepCard(step) {
  const card = el("article", { class: `step ${step.status}`, dataset: { step: step.step_id } },
    el("header", {}, el("strong", {}, step.step_id), " ", el("span", { class: "status" }, step.status),
      step.commentary ? el("span", { class: "commentary" }, " — ", step.commentary) : null));
  if (step.code && step.code.source) {
    const lines = step.code.source.split("\n").length;
    card.append(el("details", { class: "code" }, el("summary", {}, `code (${lines} lines)`),
      el("pre", {}, step.code.source)));
  }
  for (const call of step.tool_calls || step.calls || []) card.append(callLine(call));
  if (step.output) {
    card.append(el("details", { class: "output" }, el("summary", {},
      `what the model saw (${step.output_chars ?? step.output.length} characters${step.output_truncated ? ", cut" : ""})`),
      el("pre", {}, step.output)));
  }
  return card;
}

function turnFooter(query) {
  const usage = query.usage || {};
  const rollup = query.rollup || {};
  const thanks = el("span", { class: "muted", "aria-live": "polite" });
  const comment = el("input", { class: "comment", maxlength: 2000, placeholder: "comment (optional)",
    "aria-label": "feedback comment" });
  const rated = (rating, on) => el("button", { type: "button", class: "small", "aria-pressed": "false",
    "aria-label": `${rating === "up" ? "good" : "bad"} answer`, onclick: async (event) => {
      const button = event.currentTarget;  // gone from the event once it is awaited
      try {
        const body = comment.value ? { rating, comment: comment.value } : { rating };
        await api(`/queries/${query.id}/feedback`, { method: "POST", body });
        for (const b of button.parentElement.querySelectorAll("[aria-pressed]")) b.setAttribute("aria-pressed", "false");
        button.setAttribute("aria-pressed", "true");  // a second rating replaces the first
        thanks.textContent = " thanks, noted";
      } catch (error) {
        thanks.textContent = ` ${error.message}`;
      }
    } }, on);
  return el("footer", { class: "turn" },
    el("span", {}, `${query.status} · ${(query.runtime_ms ?? rollup.duration_ms ?? 0) / 1000} s · ${rollup.n_steps ?? 0} steps`,
      usage.total_tokens ? ` · ${usage.total_tokens} tokens` : "", ` · ${query.model || ""}`), " ",
    el("a", { href: `#/trace?q=${encodeURIComponent(query.id)}` }, "trace"), " ",
    comment, " ", rated("up", "▲ good"), rated("down", "▼ bad"), thanks);
}

export async function askView() {
  const show = screen();
  const chosen = (params().get("ctx") || "").split(",").filter(Boolean);
  let sessionId = params().get("s");  // #/ask?s=… continues a past session
  const follow = el("input", { type: "checkbox", id: "follow", checked: true });
  const followRow = el("div", { class: "follow", hidden: true }, follow, " ",
    el("label", { for: "follow", id: "follow-label" }, "follow up in this session"));
  // The contexts to ask over: one checkbox per context the server has, those in the link ticked (a
  // slug the server does not know stays listed, ticked, so the turn says why it cannot run).
  const contexts = el("fieldset", { class: "scope" }, el("legend", {}, "Contexts"));
  let listed = false;  // until the list arrives, the link's contexts are the scope (an early Ask must not lose it)
  const scopeOf = () => (listed ? [...contexts.querySelectorAll("input:checked")].map((box) => box.value) : chosen);
  const addContext = (slug, label, checked) => {
    const id = `ctx-${slug}`;
    contexts.append(el("span", { class: "choice" }, el("input", { type: "checkbox", id, value: slug, checked }),
      el("label", { for: id }, label)));
  };
  api("/contexts").then((r) => r.json()).then((data) => {
    const known = data.map((c) => c.slug);
    for (const slug of known) addContext(slug, slug, chosen.includes(slug) || (!chosen.length && known.length === 1));
    for (const slug of chosen.filter((s) => !known.includes(s))) addContext(slug, `${slug} (unknown)`, true);
    listed = true;
    pin();
  }).catch((error) => showError(contexts, error));
  const question = el("textarea", { id: "ask", name: "ask", rows: 3, required: true,
    placeholder: "Ask a question about the documents (Ctrl+Enter asks)" });
  question.value = params().get("q") || "";  // a sample question links here with its text
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  const steps = el("section", { class: "steps", "aria-label": "Steps" });
  const result = el("section", { class: "result" });
  const history = el("section", { class: "history", "aria-label": "This session's turns" });
  let shown = null;  // the Query whose answer is shown
  let pushed = false;  // the panel's history entry is ours: closing it goes Back
  let kept = null;  // the citation link clicked, and where it was on the screen
  const openCitation = (n, link = null) => {
    kept = link ? { link, top: link.getBoundingClientRect().top } : null;
    const q = new URLSearchParams(location.hash.split("?")[1] || "");
    const open = q.has("cite");
    q.set("cite", String(n));
    if (open) {
      location.replace(`#/ask?${q}`);  // switching citations: one entry for the panel
    } else {
      pushed = true;
      location.hash = `#/ask?${q}`;
    }
  };
  const closePanel = () => {
    const n = params().get("cite");
    if (pushed) {
      window.history.back();  // `history` here is the session's turns
    } else {
      const q = new URLSearchParams(location.hash.split("?")[1] || "");
      q.delete("cite");
      location.replace(`#/ask?${q}`);
    }
    // The keyboard goes back to the marker that opened it.
    setTimeout(() => document.querySelector(`a.cite[data-n="${n}"]`)?.focus(), 0);
  };
  const panel = sourcePanel(closePanel);
  const layout = el("div", { class: "ask-layout" });
  // Opening a source narrows the thread beside it and its text flows again, which would carry the
  // clicked citation down the page, out of view: the page scrolls by as much, so it stays put.
  const holdClicked = () => {
    if (!kept) return;
    const { link, top } = kept;
    kept = null;
    if (link.isConnected) window.scrollBy(0, link.getBoundingClientRect().top - top);
  };
  const syncPanel = () => {
    const n = Number(params().get("cite"));
    const citation = shown?.citations?.[n - 1];
    if (!citation) pushed = false;
    layout.classList.toggle("with-source", Boolean(citation));
    holdClicked();
    if (citation) panel.show(citation, n); else panel.hide();
  };
  let key = threadKey();
  followInPlace(() => {
    if (threadKey() !== key) return false;
    syncPanel();
    return true;
  });
  const answered = (query) => {  // a turn's end shown: its citations open in the panel
    shown = query;
    finish(result, query, openCitation);
    foldSteps(steps, query);
    return query;
  };
  const button = el("button", { type: "submit" }, "Ask");
  const model = el("select", { id: "model", "aria-label": "Model" });
  const maxSteps = el("input", { id: "max-steps", type: "number", min: 1, max: 50, placeholder: "default",
    "aria-label": "Max steps" });
  const instructions = el("textarea", { id: "instructions", rows: 2,
    placeholder: "Session instructions (kept for every turn of the session)" });
  const shape = el("textarea", { id: "shape", rows: 3, spellcheck: "false",
    placeholder: 'Shape: a JSON Schema for a JSON answer, e.g. {"type": "object", "properties": {"limit": {"type": "string"}}}' });
  const outputLimit = el("input", { id: "output-limit", type: "number", min: 1, max: 100000, placeholder: "10000",
    "aria-describedby": "output-limit-help" });
  const workflows = ["search", "search_rag", "search_cc"];
  const variant = (n, workflow) => el("div", { class: "variant" },
    el("select", { "aria-label": `comparison run ${n}: workflow`, class: "cmp-workflow" },
      el("option", { value: "" }, n === 1 ? "workflow" : "— (no run)"),
      workflows.map((w) => el("option", { value: w, selected: w === workflow }, w))),
    el("select", { "aria-label": `comparison run ${n}: model`, class: "cmp-model" }));
  const variants = [variant(1, "search"), variant(2, "search_rag"), variant(3, null)];
  const compare = el("button", { type: "button", class: "secondary" }, "Compare side by side");
  const workflowHelp = el("small", { class: "help", id: "workflow-help" },
    "search: the model writes code that searches, reads and queries tables, step by step (up to 8 steps), then answers. ",
    "search_cc: the same loop under the contract's other name. ",
    "search_rag: no loop, one fixed hybrid search and a drill into the best hits (2 steps), then the answer: faster and cheaper, weaker when the answer needs several lookups.");
  const offlineNote = el("small", { class: "help", hidden: true },
    "No model is configured: every run is Sleuth's offline planner, so runs differ only by workflow. ",
    "Add a model (README, “Add a model”) to compare models.");
  const cancel = el("button", { type: "button", class: "secondary", hidden: true }, "Cancel");
  const running = { id: null };
  cancel.addEventListener("click", async () => {
    if (running.id) await api(`/queries/${running.id}/cancel`, { method: "POST", body: {} }).catch(() => {});
  });
  api("/models").then((r) => r.json()).then((catalog) => {
    const usable = (catalog.models || []).filter((m) => m.available);
    if (usable.every((m) => m.id === "sleuth/offline")) {
      offlineNote.hidden = false;
      for (const v of variants) v.querySelector(".cmp-model").disabled = true;
    }
    for (const m of catalog.models || []) {
      if (!m.available) continue;
      model.append(el("option", { value: m.id, selected: m.id === catalog.default }, m.label || m.id));
      for (const v of variants) {
        v.querySelector(".cmp-model").append(el("option", { value: m.id, selected: m.id === catalog.default }, m.label || m.id));
      }
    }
  }).catch(() => {});
  // The options that apply to one turn; false (with the problem shown) when one is not valid.
  function perTurnOptions(turn, where) {
    if (maxSteps.value) turn.max_steps = Number(maxSteps.value);
    if (outputLimit.value) turn.max_tool_output_chars = Number(outputLimit.value);
    if (shape.value.trim()) {
      try {
        turn.shape = JSON.parse(shape.value);
      } catch (error) {
        showError(where, new Error(`shape: not JSON: ${error.message}`));
        return false;
      }
    }
    return true;
  }

  // A comparison group: the same question as up to three turns (each a workflow and a model), run in
  // the background together and shown side by side in #/compare.
  compare.addEventListener("click", async () => {
    const runs = variants.map((v) => ({ workflow: v.querySelector(".cmp-workflow").value, model: v.querySelector(".cmp-model").value }))
      .filter((r) => r.workflow);
    if (!question.value.trim() || runs.length < 2) {
      showError(result, new Error("a comparison needs a question and at least two runs (workflow and model)"));
      return;
    }
    const same = (a, b) => a.model === b.model && [a.workflow, b.workflow].every((w) => w !== "search_rag");
    const twins = runs.flatMap((a, i) => runs.slice(i + 1).filter((b) => same(a, b)).map(() => i + 1));
    if (twins.length) {  // search and search_cc are one loop: the same model would answer twice alike
      showError(result, new Error("two of these runs are the same (search and search_cc run one loop): change a workflow or a model"));
      return;
    }
    const group = `cmp_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const scope = scopeOf();
    if (!scope.length) {
      noScope();
      return;
    }
    compare.disabled = true;
    try {
      const turns = runs.map((run) => {
        const turn = { ask: question.value, scope, comparison_group: group, background: true, workflow: run.workflow,
          system_prompt: instructions.value || undefined };
        if (run.model) turn.model = run.model;
        return turn;
      });
      if (!turns.every((turn) => perTurnOptions(turn, result))) return;  // checked before any turn starts
      const ids = [];
      for (const turn of turns) {
        ids.push((await (await api("/query", { method: "POST", body: turn, headers: versionFor(turn) })).json()).id);
      }
      location.hash = `#/compare?q=${encodeURIComponent(ids[0])}`;
    } catch (error) {
      showError(result, error);
    } finally {
      compare.disabled = false;
    }
  });
  // A turn over no context is refused before it is sent, in words (not the API's field check).
  const noScope = () => {
    showError(result, new Error("Choose at least one context to ask."));
    contexts.querySelector("input:not(:disabled)")?.focus();
  };
  const form = el("form", { class: "ask", onsubmit: async (event) => {
    event.preventDefault();
    const turn = sessionId && follow.checked
      ? { ask: question.value, session_id: sessionId }
      : { ask: question.value, scope: scopeOf(),
          system_prompt: instructions.value || undefined };
    if (turn.scope && !turn.scope.length) {
      noScope();
      return;
    }
    button.disabled = true;
    steps.replaceChildren();
    result.replaceChildren(el("p", { class: "muted" }, "Working…"));
    shown = null;
    syncPanel();
    if (model.value && !turn.session_id) turn.model = model.value;  // a session keeps its first model
    if (!perTurnOptions(turn, result)) {
      button.disabled = false;
      return;
    }
    cancel.hidden = false;
    try {
      const query = await streamTurn(turn, steps, result, running, answered);
      if (query) {
        sessionId = query.session_id;
        question.value = "";
        remember(query);
        key = threadKey();
        await showSession();
      }
    } catch (error) {
      showError(result, error);
    } finally {
      button.disabled = false;
      cancel.hidden = true;
      running.id = null;
    }
  } },
  contexts,
  el("label", { for: "ask" }, "Question"), question, followRow,
  el("details", { class: "options" }, el("summary", {}, "options"),
    // Each option its label above it; the short ones side by side where there is room.
    el("div", { class: "option-fields" },
      el("div", { class: "option" }, el("label", { for: "model" }, "Model"), model),
      el("div", { class: "option short" }, el("label", { for: "max-steps" }, "Max steps"), maxSteps),
      el("div", { class: "option short" }, el("label", { for: "output-limit" }, "Output limit"), outputLimit,
        el("small", { id: "output-limit-help", class: "muted" }, "characters of each step's result the model sees (1–100,000)")),
      el("div", { class: "option wide" }, el("label", { for: "instructions" }, "Instructions"), instructions),
      el("div", { class: "option wide" }, el("label", { for: "shape" }, "Shape"), shape)),
    el("fieldset", { class: "compare", "aria-describedby": "workflow-help" },
      el("legend", {}, "Compare: the same question as 2–3 runs, side by side"),
      workflowHelp, offlineNote, variants, compare)),
  el("div", { class: "actions" }, button, " ", cancel));
  // A session pins its scope, model and instructions at its first turn: while following up, those
  // controls are shown disabled rather than silently ignored.
  const pin = () => {
    const on = Boolean(sessionId) && follow.checked;
    for (const control of [...contexts.querySelectorAll("input"), model, instructions]) control.disabled = on;
  };
  follow.addEventListener("change", pin);
  async function showSession() {
    followRow.hidden = false;
    document.getElementById("follow-label").textContent = `follow up in session ${sessionId}`;
    const session = await (await api(`/sessions/${encodeURIComponent(sessionId)}`)).json();
    if (session.system_prompt) instructions.value = session.system_prompt;
    history.replaceChildren(el("h2", {}, "This session"), turnsTable(session.queries));
    pin();
  }
  // The answer first, then the steps that led to it (folded into one line once it is in).
  layout.append(el("div", { class: "thread" }, form, result, steps, history), panel.node);
  if (!show(el("h1", {}, "Ask"), layout)) return;
  question.focus();
  const earlier = params().get("a");  // Back from the page viewer, a reload, a link: that answer again
  if (earlier) {
    api(`/queries/${encodeURIComponent(earlier)}`).then((r) => r.json()).then((query) => {
      if (!result.isConnected) return;
      for (const step of query.steps || []) steps.append(stepCard(step));
      answered(query);
      syncPanel();  // a link with `&cite=N` opens that citation beside it
    }).catch((error) => showError(result, error));
  }
  if (sessionId) await showSession().catch((error) => showError(history, error));
}

// The answered turn in this history entry's URL (no new entry, no re-render): Back and Forward, and a
// reload or a shared link, show the answer and its session again instead of an empty form.
function remember(query) {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  q.delete("q");
  q.delete("cite");
  q.set("s", query.session_id);
  q.set("a", query.id);
  history.replaceState(history.state, "", `#/ask?${q}`);
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// Once a turn has answered, its finished steps fold into one line below the answer ("2 steps · 5 SDK
// calls"), opened to see them; a turn that did not answer keeps them open, they say why.
function foldSteps(steps, query) {
  const cards = [...steps.querySelectorAll(":scope > .step")];
  if (query.status !== "completed" || !cards.length) return;
  const n = query.rollup?.n_steps ?? cards.length;
  const calls = query.rollup?.n_tool_calls ?? steps.querySelectorAll(".call").length;
  steps.replaceChildren(el("details", { class: "steps-done" },
    el("summary", {}, `${plural(n, "step")} · ${plural(calls, "SDK call")}`), cards));
}

// The output limit is an extension the API accepts only under its `unstable` version.
function versionFor(turn) {
  return turn.max_tool_output_chars ? { "x-pinecone-api-version": "unstable" } : {};
}

// The turn's end as the Query says it: the answer with its citations, the JSON, the footer.
function finish(result, query, open = null) {
  const asked = query.input?.[0]?.content;
  if (query.status === "completed") {
    renderAnswer(result, query, { open });
    renderJson(result, query);
    if (asked) result.prepend(el("p", { class: "asked" }, el("span", { class: "muted" }, "You asked: "), asked));
  } else if (!result.querySelector("[role=alert]")) {
    result.replaceChildren(el("p", { class: "error", role: "alert" }, `${query.status}: ${query.error || ""}`));
  }
  result.append(turnFooter(query));
  return query;
}

async function streamTurn(body, steps, result, running = {}, ended = (query) => finish(result, query)) {
  const response = await api("/query", { method: "POST", body: { ...body, stream: true },
    headers: { accept: "text/event-stream", ...versionFor(body) } });
  running.id = response.headers.get("x-sleuth-query-id") || running.id;  // cancellable even while queued
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const cards = new Map();
  for (;;) {
    if (!steps.isConnected) {  // the person left the view: stop reading (the turn goes on, in its session)
      reader.cancel().catch(() => {});
      return null;
    }
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const kind = (frame.match(/^event: (.*)$/m) || [])[1];
      const data = (frame.match(/^data: (.*)$/m) || [])[1];
      if (!kind || !data) continue;
      const payload = JSON.parse(data);
      if (kind === "response.created") running.id = payload.query_id;
      if (kind === "response.step") {
        const merged = { ...(cards.get(payload.step_id)?.step || {}), ...payload };
        const card = stepCard(merged);
        const old = cards.get(payload.step_id)?.card;
        if (old) old.replaceWith(card); else steps.append(card);
        cards.set(payload.step_id, { step: merged, card });
      } else if (kind === "response.failed" || kind === "response.cancelled") {
        result.replaceChildren(el("p", { class: "error", role: "alert" },
          `${kind.split(".")[1]}: ${payload.error?.message || payload.error || ""}`));
      } else if (kind === "query") {
        return ended(payload);
      }
    }
  }
  // The stream ended before its last frame (a proxy timeout, a dropped connection): the turn goes on
  // on the server, so wait for its end there.
  if (!running.id) throw new Error("the answer stream ended before the turn started");
  for (;;) {
    const query = await (await api(`/queries/${encodeURIComponent(running.id)}`)).json();
    if (TERMINAL.includes(query.status)) return steps.isConnected ? ended(query) : null;
    await new Promise((r) => setTimeout(r, 500));
  }
}
