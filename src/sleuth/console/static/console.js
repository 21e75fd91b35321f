// The Sleuth console: hash routes over the /api of the server that serves it.
//   #/                      contexts
//   #/ask?ctx=a,b           ask, with each step streamed live and the cited answer
//   #/page?ctx=&path=&page=&start=&end=   the page viewer (shareable)
// Everything the page shows comes from the API's JSON; text is always inserted as text, never as HTML.

const view = document.getElementById("view");
const popover = document.getElementById("popover");

function el(tag, attrs = {}, ...children) {
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

// With `sleuth serve --auth` the console signs in through POST /auth/login: the key typed in is sent
// once and only the login token it returns is kept (sessionStorage, gone with the tab).
const TOKEN = "sleuth.token";

class Unauthenticated extends Error {}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN);
  return token ? { authorization: `Bearer ${token}` } : {};
}

// A path of the source or knowledge tree as URL segments (each one encoded, the slashes kept).
function encodePath(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

async function api(path, options = {}) {
  const form = options.body instanceof FormData;  // a multipart upload: the browser sets its own type
  const headers = { accept: "application/json", ...authHeaders(), ...(options.headers || {}) };
  if (options.body !== undefined && !form) headers["content-type"] = "application/json";
  const response = await fetch(`/api${path}`, {
    ...options,
    headers,
    body: options.body === undefined || form ? options.body : JSON.stringify(options.body),
  });
  if (response.status === 401 && !options.signingIn) {
    sessionStorage.removeItem(TOKEN);
    throw new Unauthenticated("sign in with an API key");
  }
  if (!response.ok) {
    let message = `${response.status}`;
    let envelope = null;
    try {
      envelope = await response.json();
      message = `${envelope.code}: ${envelope.message}`;
    } catch (_) { /* not the envelope */ }
    const error = new Error(message);
    error.envelope = envelope;
    throw error;
  }
  return response;
}

function params() {
  const [, query = ""] = location.hash.split("?");
  return new URLSearchParams(query);
}

function pageLink(c) {
  const q = new URLSearchParams({
    ctx: c.context, path: c.source, page: String(c.pages[0] ?? 1), start: String(c.start), end: String(c.end),
  });
  return `#/page?${q}`;
}

function showError(where, error) {
  if (error instanceof Unauthenticated) return signInView();
  where.replaceChildren(el("p", { class: "error", role: "alert" }, String(error.message || error)));
}

function signInView() {
  const key = el("input", { id: "key", type: "password", autocomplete: "off", required: true });
  const message = el("p", { class: "muted" }, "This server needs an API key (sleuth keys create).");
  const form = el("form", { class: "ask", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const answer = await (await api("/auth/login", { method: "POST", body: { api_key: key.value },
        signingIn: true })).json();
      sessionStorage.setItem(TOKEN, answer.token);
      key.value = "";
      route();
    } catch (error) {
      message.replaceChildren(el("span", { class: "error", role: "alert" }, String(error.message || error)));
    }
  } }, el("label", { for: "key" }, "API key"), key, el("button", { type: "submit" }, "Sign in"), message);
  view.replaceChildren(el("h1", {}, "Sign in"), form);
  key.focus();
}

// ------------------------------------------------------------------------------------------ contexts
async function contextsView() {
  view.replaceChildren(el("h1", {}, "Contexts"), el("p", { class: "muted" }, "Loading…"));
  try {
    const data = await (await api("/contexts")).json();
    const rows = (data.contexts || data.data || data).map((c) =>
      el("tr", {},
        el("td", {}, el("a", { href: `#/context?ctx=${encodeURIComponent(c.slug)}` }, c.slug), " ",
          el("a", { href: `#/ask?ctx=${encodeURIComponent(c.slug)}`, class: "muted" }, "ask")),
        el("td", {}, c.name || ""),
        el("td", {}, c.queryable ? "ready" : "not curated"),
        el("td", {}, c.last_curated_at || "—")));
    const slug = el("input", { id: "new-slug", required: true, pattern: "[a-z][a-z0-9\\-]{2,63}", placeholder: "slug" });
    const name = el("input", { id: "new-name", required: true, placeholder: "name" });
    const problem = el("span", { class: "error", role: "alert" });
    const create = el("form", { class: "inline", onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api("/contexts", { method: "POST", body: { slug: slug.value, name: name.value } });
        location.hash = `#/context?ctx=${encodeURIComponent(slug.value)}`;
      } catch (error) {
        problem.textContent = error.message;
      }
    } }, el("label", { for: "new-slug" }, "New context "), slug, name,
      el("button", { type: "submit" }, "Create"), problem);
    view.replaceChildren(
      el("h1", {}, "Contexts"), create,
      el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, el("th", {}, "Slug"), el("th", {}, "Name"), el("th", {}, "State"),
          el("th", {}, "Last curated"))),
        el("tbody", {}, rows)));
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ one context
function upload(slug, file, bar) {
  // XMLHttpRequest, not fetch: it reports upload progress per file.
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", `/api/contexts/${encodeURIComponent(slug)}/import/upload`);
    for (const [name, value] of Object.entries(authHeaders())) request.setRequestHeader(name, value);
    request.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
    request.onload = () => {
      if (request.status < 300) { bar.value = 1; resolve(JSON.parse(request.responseText)); return; }
      let message = `${request.status}`;
      try { const env = JSON.parse(request.responseText); message = `${env.code}: ${env.message}`; } catch (_) { /* raw */ }
      reject(new Error(message));
    };
    request.onerror = () => reject(new Error("upload failed"));
    const form = new FormData();
    form.append("file", file);
    request.send(form);
  });
}

async function contextView() {
  const slug = params().get("ctx");
  const base = `/contexts/${encodeURIComponent(slug)}`;
  const sources = el("tbody");
  const uploads = el("ul", { class: "uploads" });
  const curateState = el("div", { class: "curate", "aria-live": "polite" });
  const files = el("input", { type: "file", id: "files", multiple: true });
  const drop = el("div", { class: "drop", tabindex: 0 }, "Drop files here, or ", el("label", { for: "files" }, "choose files"), files);

  async function refresh() {
    const listing = await (await api(`${base}/source/manifest`)).json();
    sources.replaceChildren(...listing.files.map((f) => el("tr", {},
      el("td", {}, f.path), el("td", {}, String(f.size)),
      el("td", {}, el("button", { type: "button", class: "small", "aria-label": `delete ${f.path}`, onclick: async () => {
        await api(`${base}/source/delete/${encodePath(f.path)}`, { method: "DELETE" });
        refresh();
      } }, "delete")))));
  }

  async function send(list) {
    for (const file of list) {
      const bar = el("progress", { max: 1, value: 0, "aria-label": `upload of ${file.name}` });
      const item = el("li", {}, file.name, " ", bar);
      uploads.append(item);
      try {
        await upload(slug, file, bar);
        item.append(el("span", { class: "muted" }, " uploaded"));
      } catch (error) {
        item.append(el("span", { class: "error", role: "alert" }, ` ${error.message}`));
      }
    }
    refresh();
  }
  files.addEventListener("change", () => send([...files.files]));
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); send([...e.dataTransfer.files]); });

  const curate = el("button", { type: "button", onclick: async () => {
    curate.disabled = true;
    try {
      const started = await (await api(`${base}/curate`, { method: "POST", body: {} })).json();
      const task = await waitTask(started.task_id, curateState);  // shows a failure itself
      if (task.state === "completed") curateState.append(curateSummary(task));
    } catch (error) {
      curateState.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    } finally {
      curate.disabled = false;
    }
  } }, "Curate");

  const packState = el("div", { class: "pack", "aria-live": "polite" });
  const pack = el("button", { type: "button", onclick: async () => {
    packState.replaceChildren(el("span", { class: "muted" }, "Packing…"));
    try {
      const started = await (await api(`${base}/pack`, { method: "POST", body: {} })).json();
      const task = await waitTask(started.task_id, packState);
      if (task.state !== "completed") return;
      const name = task.output.pack_filename;
      const blob = await (await api(`/tasks/${task.id}/files/read/${encodeURIComponent(name)}`, { headers: { accept: "*/*" } })).blob();
      packState.replaceChildren(el("a", { href: URL.createObjectURL(blob), download: name, id: "pack-link" },
        `download ${name}`), el("span", { class: "muted" }, ` (${task.output.pack_size} bytes)`));
    } catch (error) {
      packState.replaceChildren(el("span", { class: "error", role: "alert" }, error.message));
    }
  } }, "Pack");
  const restoreFile = el("input", { type: "file", id: "restore-file", accept: ".zip", "aria-label": "Pack to restore" });
  restoreFile.addEventListener("change", async () => {
    const file = restoreFile.files[0];
    if (!file) return;
    const form = new FormData();
    form.append("file", file);
    let started;
    try {
      started = await (await api(`${base}/restore`, { method: "POST", body: form })).json();
    } catch (error) {
      showError(packState, error);
      return;
    }
    const task = await waitTask(started.task_id, packState);
    if (task.state === "completed") {
      packState.replaceChildren(el("span", { id: "restored" }, `restored: version ${task.output.live_version}`));
      refresh();
    }
  });
  view.replaceChildren(el("h1", {}, slug, " ", el("a", { href: `#/ask?ctx=${encodeURIComponent(slug)}`, class: "muted" }, "ask"),
    " ", el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}`, class: "muted" }, "knowledge"),
    " ", el("a", { href: `#/design?ctx=${encodeURIComponent(slug)}`, class: "muted" }, "design"),
    " ", el("a", { href: `#/tables?ctx=${encodeURIComponent(slug)}`, class: "muted" }, "tables")),
    el("h2", {}, "Sources"), drop, uploads,
    el("table", { class: "grid" }, el("thead", {}, el("tr", {}, el("th", {}, "Path"), el("th", {}, "Bytes"), el("th", {}, ""))), sources),
    el("h2", {}, "Curate"), curate, curateState,
    el("h2", {}, "Pack and restore"), pack, " ", el("label", { for: "restore-file" }, "restore a pack into this (empty) context "), restoreFile, packState);
  try {
    await refresh();
  } catch (error) {
    showError(view, error);
  }
}

async function waitTask(id, where) {
  for (;;) {
    const task = await (await api(`/tasks/${id}`)).json();
    const p = task.progress || {};
    where.replaceChildren(el("span", { class: "muted" }, `${task.state} · ${p.label || p.phase || ""} · ${Math.round(p.pct || 0)}%`));
    if (["completed", "failed", "cancelled"].includes(task.state)) {
      if (task.state !== "completed") {
        where.replaceChildren(el("span", { class: "error", role: "alert" }, `${task.state}: ${task.error?.message || task.error || ""}`));
      }
      return task;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
}

function curateSummary(task) {
  const out = task.output || {};
  const delta = out.delta || {};
  const parts = [el("p", { class: "summary" },
    `version ${out.live_version ?? "—"} · ${delta.processed ?? 0} parsed · ${delta.chunks_created ?? 0} chunks created · ${delta.corpus_artifacts ?? 0} artifacts`)];
  for (const [path, why] of Object.entries(out.failures || {})) {
    parts.push(el("p", { class: why.status === "failed" ? "error" : "muted" }, `${why.status}: ${path} (${why.reason})`));
  }
  for (const [name, why] of Object.entries(out.artifacts_skipped_no_model || {})) parts.push(el("p", { class: "muted" }, `skipped ${name}: ${why}`));
  for (const warning of out.warnings || []) parts.push(el("p", { class: "muted" }, `warning: ${warning}`));
  return el("div", {}, parts);
}

// ------------------------------------------------------------------------------------------ tables
async function tablesView() {
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
      view.replaceChildren(el("h1", {}, `Tables · ${slug}`), el("ul", { class: "listing" }, data.tables.map((t) =>
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
    view.replaceChildren(el("h1", {}, `${name} `, el("span", { class: "muted" }, slug)), nav,
      el("div", { class: "scroll" }, el("table", { class: "grid" }, el("thead", {}, el("tr", {}, head)), el("tbody", {}, rows))));
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ sessions
function turnsTable(queries) {
  return el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, ["turn", "status", "latency", "tokens", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, (queries || []).map((q) => el("tr", {},
      el("td", {}, q.input?.[0]?.content ?? q.id), el("td", {}, q.status),
      el("td", {}, `${(q.rollup?.duration_ms ?? 0) / 1000} s`), el("td", {}, q.usage?.total_tokens ?? 0),
      el("td", {}, el("a", { href: `#/trace?q=${encodeURIComponent(q.id)}` }, "trace"))))));
}

async function sessionsView() {
  const id = params().get("s");
  try {
    if (!id) {
      const data = await (await api("/sessions?limit=50")).json();
      view.replaceChildren(el("h1", {}, "Sessions"), el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["session", "title", "updated"].map((h) => el("th", {}, h)))),
        el("tbody", {}, data.sessions.map((x) => el("tr", {},
          el("td", {}, el("a", { href: `#/sessions?s=${encodeURIComponent(x.id)}` }, x.id)),
          el("td", {}, x.title || ""), el("td", {}, x.updated_at || ""))))));
      return;
    }
    const session = await (await api(`/sessions/${encodeURIComponent(id)}`)).json();
    view.replaceChildren(el("h1", {}, "Session ", el("span", { class: "muted" }, id)),
      session.system_prompt ? el("p", {}, el("strong", {}, "Instructions: "), session.system_prompt) : el("span"),
      turnsTable(session.queries));
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ design
// The manifest as JSON, validated by the server: every problem is shown at its field path. Templates
// fill the editor; the profile says what a curate with a model would cost before anything is spent.
async function designView() {
  const slug = params().get("ctx");
  const base = `/contexts/${encodeURIComponent(slug)}`;
  const editor = el("textarea", { id: "manifest", rows: 18, spellcheck: "false", "aria-describedby": "problems" });
  const problems = el("ul", { id: "problems", class: "problems", "aria-live": "polite" });
  const templates = el("select", { id: "template", "aria-label": "Template" }, el("option", { value: "" }, "Start from a template…"));
  const estimate = el("div", { class: "estimate", "aria-live": "polite" });
  const saved = el("span", { class: "muted", "aria-live": "polite" });
  const save = el("button", { type: "button", onclick: async () => {
    problems.replaceChildren();
    saved.textContent = "";
    let manifest;
    try {
      manifest = JSON.parse(editor.value || "{}");
    } catch (error) {
      problems.append(el("li", { class: "error" }, `(file): not JSON: ${error.message}`));
      return;
    }
    try {
      await api(base, { method: "PUT", body: { manifest } });
      saved.textContent = "saved: the next curate uses it";
    } catch (error) {
      const found = error.envelope?.errors || [];
      if (!found.length) problems.append(el("li", { class: "error" }, error.message));
      for (const e of found) {
        problems.append(el("li", { class: "error", dataset: { path: e.path } }, el("code", {}, e.path || "(root)"), ` ${e.message}`));
      }
    }
  } }, "Save");
  const profile = el("button", { type: "button", onclick: async () => {
    estimate.replaceChildren(el("p", { class: "muted" }, "Estimating…"));
    try {
      const p = await (await api(`${base}/curate/profile`, { method: "POST", body: {} })).json();
      if (!p.model) {
        estimate.replaceChildren(el("p", { class: "muted" }, `no model would be called: ${p.reason}`));
        return;
      }
      const band = (b) => (b.low === b.high ? `${b.low}` : `${b.low}–${b.high}`);
      estimate.replaceChildren(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["type", "calls", "cached", "input tokens", "output tokens", "seconds"].map((h) => el("th", {}, h)))),
        el("tbody", {}, [...p.types, p.total].map((t) => el("tr", {}, el("td", {}, t.type), el("td", {}, band(t.calls)),
          el("td", {}, t.cached_calls), el("td", {}, band(t.input_tokens)), el("td", {}, band(t.output_tokens)),
          el("td", {}, band(t.seconds)))))));
    } catch (error) {
      estimate.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
    }
  } }, "Estimate a curate");
  view.replaceChildren(el("h1", {}, `Design · ${slug}`), templates, editor, problems,
    el("div", { class: "actions" }, save, " ", profile, " ", saved), estimate);
  try {
    const [manifest, catalog] = await Promise.all([
      (await api(`${base}/manifest`)).json(), (await api("/manifest/templates")).json()]);
    editor.value = JSON.stringify(manifest, null, 2);
    for (const t of catalog.templates) templates.append(el("option", { value: t.id }, t.label));
    templates.addEventListener("change", () => {
      const chosen = catalog.templates.find((t) => t.id === templates.value);
      if (chosen) editor.value = JSON.stringify(chosen.manifest, null, 2);
    });
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ knowledge
// The live version's knowledge tree as the API lists it: artifact types, their artifacts (front matter
// and body), rosters and the outline. An artifact's provenance links to its pages in the viewer.
async function knowledgeView() {
  const p = params();
  const slug = p.get("ctx");
  const path = p.get("path") || "";
  const base = `/contexts/${encodeURIComponent(slug)}/knowledge`;
  const crumbs = el("nav", { class: "crumbs", "aria-label": "Knowledge path" },
    el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}` }, slug),
    ...path.split("/").filter(Boolean).map((part, i, all) => [" / ",
      el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}&path=${encodeURIComponent(all.slice(0, i + 1).join("/"))}` }, part)]));
  view.replaceChildren(el("h1", {}, "Knowledge"), crumbs, el("p", { class: "muted" }, "Loading…"));
  try {
    if (!path || !path.includes(".")) {
      const listing = await (await api(`${base}/list${path ? "/" + encodePath(path) : ""}`)).json();
      const items = listing.entries.map((e) => {
        const next = path ? `${path}/${e.name}` : e.name;
        return el("li", {}, el("a", { href: `#/knowledge?ctx=${encodeURIComponent(slug)}&path=${encodeURIComponent(next)}` },
          e.kind === "dir" ? `${e.name}/` : e.name), e.kind === "file" ? el("span", { class: "muted" }, ` ${e.size} bytes`) : null);
      });
      view.replaceChildren(el("h1", {}, "Knowledge"), crumbs, el("ul", { class: "listing" }, items));
      return;
    }
    const text = await (await api(`${base}/read/${encodePath(path)}`, { headers: { accept: "*/*" } })).text();
    const parts = text.startsWith("---\n") ? text.slice(4).split("\n---\n") : [null, text];
    const front = parts.length > 1 ? parts[0] : null;
    const body = parts.length > 1 ? parts.slice(1).join("\n---\n") : text;
    const links = [];
    if (front) {
      // provenance entries are `- source: …` / `page: N` / `start: N` / `end: N` lines of the YAML front matter
      const re = /- source: (.+)\n\s+page: (\d+)\n\s+start: (\d+)\n\s+end: (\d+)/g;
      for (const m of front.matchAll(re)) {
        const q = new URLSearchParams({ ctx: slug, path: m[1].trim(), page: m[2], start: m[3], end: m[4] });
        links.push(el("li", {}, el("a", { href: `#/page?${q}` }, `${m[1].trim()}, p. ${m[2]} [${m[3]}:${m[4]}]`)));
      }
    }
    view.replaceChildren(el("h1", {}, "Knowledge"), crumbs,
      el("pre", { class: "page-text" }, body),
      ...(links.length ? [el("h2", {}, "Evidence"), el("ul", { class: "evidence-links" }, links)] : []),
      ...(front ? [el("details", {}, el("summary", {}, "front matter"), el("pre", {}, front))] : []));
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ ask
function stepCard(step) {
  const card = el("article", { class: `step ${step.status}`, dataset: { step: step.step_id } },
    el("header", {}, el("strong", {}, step.step_id), " ", el("span", { class: "status" }, step.status),
      step.commentary ? el("span", { class: "commentary" }, " — ", step.commentary) : null));
  if (step.code && step.code.source) {
    const lines = step.code.source.split("\n").length;
    card.append(el("details", { class: "code" }, el("summary", {}, `code (${lines} lines)`),
      el("pre", {}, step.code.source)));
  }
  for (const call of step.tool_calls || step.calls || []) {
    card.append(el("div", { class: "call" }, `${call.fn || call.name}(${call.args || ""})`,
      call.ms !== undefined ? el("span", { class: "muted" }, ` ${Math.round(call.ms)} ms`) : null));
  }
  if (step.output) {
    card.append(el("details", { class: "output" }, el("summary", {},
      `what the model saw (${step.output_chars ?? step.output.length} characters${step.output_truncated ? ", cut" : ""})`),
      el("pre", {}, step.output)));
  }
  return card;
}

function renderJson(target, query) {
  if (query.output_json) {
    target.append(el("h2", {}, "JSON"), el("pre", { class: "json" }, JSON.stringify(query.output_json, null, 2)));
  }
}

function renderAnswer(target, query) {
  const text = (query.output || []).flatMap((m) => m.content || []).map((p) => p.text || "").join("");
  const citations = query.citations || [];
  const answer = el("div", { class: "answer" });
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    answer.append(text.slice(last, match.index));
    const citation = citations[Number(match[1]) - 1];
    if (citation) {
      answer.append(el("a", {
        class: "cite", href: pageLink(citation), dataset: { n: match[1] },
        "aria-label": `citation ${match[1]}: ${citation.source}, page ${citation.pages.join(", ")}`,
        onmouseenter: (e) => showCitation(e.currentTarget, citation),
        onfocus: (e) => showCitation(e.currentTarget, citation),
        onmouseleave: hideCitation, onblur: hideCitation,
      }, match[0]));
    } else {
      answer.append(match[0]);
    }
    last = match.index + match[0].length;
  }
  answer.append(text.slice(last));
  const list = el("ol", { class: "citations" }, citations.map((c) =>
    el("li", {}, el("a", { href: pageLink(c) }, `${c.source}, p. ${c.pages.join(", ")}`), " ",
      el("q", {}, c.grounding))));
  target.replaceChildren(el("h2", {}, "Answer"), answer, ...(citations.length ? [list] : []));
}

function showCitation(anchor, citation) {
  popover.replaceChildren(el("div", { class: "where" }, `${citation.source} · page ${citation.pages.join(", ")}`),
    el("q", {}, citation.grounding));
  const box = anchor.getBoundingClientRect();
  popover.style.left = `${Math.max(8, Math.min(box.left, innerWidth - 360))}px`;
  popover.style.top = `${box.bottom + scrollY + 6}px`;
  popover.hidden = false;
}

function hideCitation() {
  popover.hidden = true;
}

function turnFooter(query) {
  const usage = query.usage || {};
  const rollup = query.rollup || {};
  const thanks = el("span", { class: "muted", "aria-live": "polite" });
  const comment = el("input", { class: "comment", maxlength: 2000, placeholder: "comment (optional)",
    "aria-label": "feedback comment" });
  const rate = (rating) => async () => {
    try {
      const body = comment.value ? { rating, comment: comment.value } : { rating };
      await api(`/queries/${query.id}/feedback`, { method: "POST", body });
      thanks.textContent = " thanks, noted";
    } catch (error) {
      thanks.textContent = ` ${error.message}`;
    }
  };
  return el("footer", { class: "turn" },
    el("span", {}, `${query.status} · ${(rollup.duration_ms ?? 0) / 1000} s · ${rollup.n_steps ?? 0} steps · `,
      `${usage.total_tokens ?? 0} tokens`), " ",
    el("a", { href: `#/trace?q=${encodeURIComponent(query.id)}` }, "trace"), " ",
    comment, " ",
    el("button", { type: "button", class: "small", "aria-label": "good answer", onclick: rate("up") }, "👍"),
    el("button", { type: "button", class: "small", "aria-label": "bad answer", onclick: rate("down") }, "👎"),
    thanks);
}

async function askView() {
  const chosen = (params().get("ctx") || "").split(",").filter(Boolean);
  let sessionId = null;
  const follow = el("input", { type: "checkbox", id: "follow", checked: true });
  const followRow = el("div", { class: "follow", hidden: true }, follow, " ",
    el("label", { for: "follow", id: "follow-label" }, "follow up in this session"));
  const contexts = el("input", { id: "ctx", name: "ctx", value: chosen.join(","), required: true,
    placeholder: "context slugs, comma-separated" });
  const question = el("textarea", { id: "ask", name: "ask", rows: 3, required: true,
    placeholder: "Ask a question about the documents" });
  const steps = el("section", { class: "steps", "aria-label": "Steps" });
  const result = el("section", { class: "result" });
  const history = el("section", { class: "history", "aria-label": "This session's turns" });
  const button = el("button", { type: "submit" }, "Ask");
  const model = el("select", { id: "model", "aria-label": "Model" });
  const maxSteps = el("input", { id: "max-steps", type: "number", min: 1, max: 50, placeholder: "default",
    "aria-label": "Max steps" });
  const instructions = el("textarea", { id: "instructions", rows: 2,
    placeholder: "Session instructions (kept for every turn of the session)" });
  const shape = el("textarea", { id: "shape", rows: 3, spellcheck: "false",
    placeholder: 'Shape: a JSON Schema for a JSON answer, e.g. {"type": "object", "properties": {"limit": {"type": "string"}}}' });
  const cancel = el("button", { type: "button", class: "secondary", hidden: true }, "Cancel");
  const running = { id: null };
  cancel.addEventListener("click", async () => {
    if (running.id) await api(`/queries/${running.id}/cancel`, { method: "POST", body: {} }).catch(() => {});
  });
  api("/models").then((r) => r.json()).then((catalog) => {
    for (const m of catalog.models || []) {
      if (m.available) model.append(el("option", { value: m.id, selected: m.id === catalog.default }, m.label || m.id));
    }
  }).catch(() => {});
  const form = el("form", { class: "ask", onsubmit: async (event) => {
    event.preventDefault();
    button.disabled = true;
    steps.replaceChildren();
    result.replaceChildren(el("p", { class: "muted" }, "Working…"));
    const turn = sessionId && follow.checked
      ? { ask: question.value, session_id: sessionId }
      : { ask: question.value, scope: contexts.value.split(",").map((s) => s.trim()).filter(Boolean),
          system_prompt: instructions.value || undefined };
    if (model.value) turn.model = model.value;
    if (maxSteps.value) turn.max_steps = Number(maxSteps.value);
    if (shape.value.trim()) {
      try {
        turn.shape = JSON.parse(shape.value);
      } catch (error) {
        showError(result, new Error(`shape: not JSON: ${error.message}`));
        button.disabled = false;
        return;
      }
    }
    cancel.hidden = false;
    try {
      const query = await streamTurn(turn, steps, result, running);
      if (query) {
        sessionId = query.session_id;
        followRow.hidden = false;
        document.getElementById("follow-label").textContent = `follow up in session ${sessionId}`;
        question.value = "";
        const session = await (await api(`/sessions/${sessionId}`)).json();
        history.replaceChildren(el("h2", {}, "This session"), turnsTable(session.queries));
      }
    } catch (error) {
      showError(result, error);
    } finally {
      button.disabled = false;
      cancel.hidden = true;
      running.id = null;
    }
  } },
  el("label", { for: "ctx" }, "Contexts"), contexts,
  el("label", { for: "ask" }, "Question"), question, followRow,
  el("details", { class: "options" }, el("summary", {}, "options"),
    el("label", { for: "model" }, "Model"), model, el("label", { for: "max-steps" }, "Max steps"), maxSteps,
    el("label", { for: "instructions" }, "Instructions"), instructions,
    el("label", { for: "shape" }, "Shape"), shape),
  el("div", { class: "actions" }, button, " ", cancel));
  view.replaceChildren(el("h1", {}, "Ask"), form, steps, result, history);
  question.focus();
}

async function streamTurn(body, steps, result, running = {}) {
  const response = await api("/query", { method: "POST", body: { ...body, stream: true },
    headers: { accept: "text/event-stream" } });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const cards = new Map();
  for (;;) {
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
        if (payload.status === "completed") {
          renderAnswer(result, payload);
          renderJson(result, payload);
        }
        result.append(turnFooter(payload));
        return payload;
      }
    }
  }
  return null;
}

// ------------------------------------------------------------------------------------------ trace
async function traceView() {
  const id = params().get("q");
  view.replaceChildren(el("h1", {}, "Trace ", el("span", { class: "muted" }, id)), el("p", { class: "muted" }, "Loading…"));
  try {
    const trace = await (await api(`/queries/${encodeURIComponent(id)}/trace`)).json();
    const steps = el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["step", "status", "calls", "fresh in", "cached", "out", "ms"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (trace.steps || []).map((st) => el("tr", {},
        el("td", {}, st.step_id), el("td", {}, st.status), el("td", {}, (st.fns || []).join(", ")),
        el("td", {}, st.cost?.tokens_in_fresh ?? 0), el("td", {}, st.cost?.tokens_in_cached ?? 0),
        el("td", {}, st.cost?.tokens_out ?? 0),
        el("td", {}, (st.cost?.decide_ms ?? 0) + (st.cost?.execute_ms ?? 0))))));
    const evidence = el("table", { class: "grid evidence" },
      el("thead", {}, el("tr", {}, ["ref", "source", "page", "kind", "seen", "cited"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (trace.evidence || []).map((e) => el("tr", { class: e.cited ? "cited" : "" },
        el("td", {}, e.ref), el("td", {}, e.source), el("td", {}, e.page), el("td", {}, e.kind),
        el("td", {}, e.seen ? "yes" : ""), el("td", {}, e.cited ? "yes" : "")))));
    const dropped = (trace.citations_dropped || []).map((d) => el("li", {}, JSON.stringify(d)));
    const outcome = el("p", { id: "replay-result", "aria-live": "polite" });
    const replay = el("button", { type: "button", onclick: async () => {
      outcome.textContent = "Replaying…";
      try {
        const report = await (await api(`/queries/${encodeURIComponent(id)}/replay`, {
          method: "POST", body: {}, headers: { "x-pinecone-api-version": "unstable" } })).json();
        outcome.textContent = report.identical
          ? `identical (${report.steps_compared} steps compared)`
          : `differs at ${report.first_difference.step_id}: ${report.first_difference.field}`;
      } catch (error) {
        outcome.textContent = error.message;
      }
    } }, "Replay");
    view.replaceChildren(el("h1", {}, "Trace ", el("span", { class: "muted" }, id)),
      el("h2", {}, "Steps"), steps, el("h2", {}, "Evidence"), evidence,
      ...(dropped.length ? [el("h2", {}, "Dropped citations"), el("ul", {}, dropped)] : []),
      el("h2", {}, "Replay"), replay, outcome);
  } catch (error) {
    showError(view, error);
  }
}

// ------------------------------------------------------------------------------------------ page viewer
async function pageView() {
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

// ------------------------------------------------------------------------------------------ router
function route() {
  hideCitation();
  const name = location.hash.split("?")[0];
  if (name === "#/ask") return askView();
  if (name === "#/page") return pageView();
  if (name === "#/trace") return traceView();
  if (name === "#/context") return contextView();
  if (name === "#/knowledge") return knowledgeView();
  if (name === "#/design") return designView();
  if (name === "#/sessions") return sessionsView();
  if (name === "#/tables") return tablesView();
  return contextsView();
}

addEventListener("hashchange", route);
route();
