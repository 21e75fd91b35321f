import { api, apiUrl, authHeaders, failure, showError } from "../lib/api.js";
import { bytes, el, encodePath, pageHref, params, screen, slugFollows, SLUG_PATTERN, SLUG_RULE, stacked } from "../lib/dom.js";
import { waitTask } from "../lib/tasks.js";
import { connectorsSection } from "./connectors.js";

// A file goes under uploads/, in the folder it was in when a folder was chosen or dropped.
function upload(slug, file, folder, bar) {
  // XMLHttpRequest, not fetch: it reports upload progress per file.
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    const where = new URLSearchParams({ path: folder ? `uploads/${folder}` : "uploads" });
    request.open("POST", `${apiUrl(`/contexts/${encodeURIComponent(slug)}/import/upload`)}?${where}`);
    for (const [name, value] of Object.entries(authHeaders())) request.setRequestHeader(name, value);
    request.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
    request.onload = () => {
      if (request.status < 300) { bar.value = 1; resolve(JSON.parse(request.responseText)); return; }
      reject(failure(request.status, request.responseText));
    };
    request.onerror = () => reject(new Error("upload failed"));
    const form = new FormData();
    form.append("file", file, file.name);  // the name alone: a folder's file would send its relative path
    request.send(form);
  });
}

// What was dropped, folders walked: each file with the folder it was in (kept under uploads/). The
// entries are taken before the first await: a drop's items are gone once its handler yields.
async function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items].map((item) => item.webkitGetAsEntry?.()).filter(Boolean);
  if (!entries.length) return [...dataTransfer.files].map((file) => ({ file, folder: "" }));
  const out = [];
  const walk = async (entry, folder) => {
    if (entry.isFile) {
      out.push({ file: await new Promise((ok, fail) => entry.file(ok, fail)), folder });
      return;
    }
    const inside = folder ? `${folder}/${entry.name}` : entry.name;
    const reader = entry.createReader();
    for (;;) {  // readEntries answers in batches until an empty one
      const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail));
      if (!batch.length) break;
      for (const child of batch) await walk(child, inside);
    }
  };
  for (const entry of entries) await walk(entry, "");
  return out;
}

export async function contextView() {
  const show = screen();
  const slug = params().get("ctx");
  const base = `/contexts/${encodeURIComponent(slug)}`;
  const sources = el("tbody");
  const sourcesTable = el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, el("th", {}, "Path"), el("th", {}, "Size"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))), sources);
  const uploads = el("ul", { class: "uploads" });
  const curateState = el("div", { class: "curate", "aria-live": "polite" });
  const about = el("section", { class: "about", "aria-label": "About this context" });
  const files = el("input", { type: "file", id: "files", multiple: true });
  // The drop zone is for the mouse; the file input inside it is the keyboard's way (one tab stop).
  const folderInput = el("input", { type: "file", id: "folder", webkitdirectory: true });
  const drop = el("div", { class: "drop" }, "Drop files, folders or archives here, or ", el("label", { for: "files" }, "choose files"),
    files, " or ", el("label", { for: "folder" }, "a folder"), folderInput);
  const sourceProblem = el("p", { class: "error", role: "alert" });

  async function refresh() {
    const listing = await (await api(`${base}/source/manifest`)).json();
    sources.replaceChildren(...listing.files.map((f) => el("tr", {},
      el("td", {}, el("a", { href: pageHref({ ctx: slug, path: f.path, page: 1 }),
        title: "read its pages" }, f.path)), el("td", { class: "num" }, bytes(f.size)),
      el("td", {}, el("button", { type: "button", class: "small", "aria-label": `delete ${f.path}`, onclick: async () => {
        if (!confirm(`Delete ${f.path}? The next curate removes what was built from it.`)) return;
        try {
          await api(`${base}/source/delete/${encodePath(f.path)}`, { method: "DELETE" });
          await refresh();
        } catch (error) {
          showError(sourceProblem, error);
        }
      } }, "delete")))));
    stacked(sourcesTable);
  }

  // An archive is expanded by an import task after the upload: its progress, then what became of
  // each member (extracted, skipped or failed, with the reason).
  // Each import task is watched once: the page's first look at the context can find the task an
  // upload from this very page started a moment before.
  const watched = new Set();
  async function expand(taskId, item) {
    if (watched.has(taskId)) return;
    watched.add(taskId);
    const state = el("span", { class: "import", "aria-live": "polite" });
    item.append(" ", state);
    const task = await waitTask(taskId, state);
    if (task.state !== "completed") return;
    const out = task.output || {};
    const counts = out.counts || {};
    state.replaceChildren(el("span", { class: "summary" },
      `expanded: ${counts.extracted ?? 0} extracted · ${counts.skipped ?? 0} skipped · ${counts.failed ?? 0} failed`));
    const unusual = (out.files || []).filter((f) => f.action !== "extracted");
    if (unusual.length) {
      item.append(el("ul", { class: "members" }, unusual.map((f) =>
        el("li", { class: f.action === "failed" ? "error" : "muted" }, `${f.action}: ${f.member} (${f.reason})`))));
    }
    if (out.truncated) item.append(el("p", { class: "muted" }, "(the first members only)"));
  }

  async function send(list) {
    for (const { file, folder } of list) {
      const name = folder ? `${folder}/${file.name}` : file.name;
      const bar = el("progress", { max: 1, value: 0, "aria-label": `upload of ${name}` });
      const item = el("li", {}, name, " ", bar);
      uploads.append(item);
      try {
        const answer = await upload(slug, file, folder, bar);
        item.append(el("span", { class: "muted" }, " uploaded"));
        if (answer.state === "importing") await expand(answer.task_id, item);
      } catch (error) {
        item.append(el("span", { class: "error", role: "alert" }, ` ${error.message}`));
      }
    }
    refresh();
  }
  files.addEventListener("change", () => send([...files.files].map((file) => ({ file, folder: "" }))));
  folderInput.addEventListener("change", () => send([...folderInput.files].map((file) => (
    { file, folder: file.webkitRelativePath.split("/").slice(0, -1).join("/") }))));
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", async (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    send(await droppedFiles(e.dataTransfer));
  });

  async function watchCurate(taskId) {
    const task = await waitTask(taskId, curateState);  // shows a failure itself
    if (task.state === "completed") {
      curateState.append(curateSummary(task));
      await describe(slug, base, about);  // the new live version and its sample questions
    }
  }

  const curate = el("button", { type: "button", onclick: async () => {
    curate.disabled = true;
    try {
      const started = await (await api(`${base}/curate`, { method: "POST", body: {} })).json();
      await watchCurate(started.task_id);
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
        `download ${name}`), el("span", { class: "muted" }, ` (${bytes(task.output.pack_size)})`));
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
    await watchRestore(started.task_id);
  });
  async function watchRestore(taskId) {
    try {
      const task = await waitTask(taskId, packState);
      if (task.state === "completed") {
        packState.replaceChildren(el("span", { id: "restored" }, `restored: version ${task.output.live_version}`));
        await refresh();
        await describe(slug, base, about);
      }
    } catch (error) {
      showError(packState, error);
    }
  }
  // Fork: a new context that starts as this one is now; the person names it (the slug follows the
  // name as it is typed) and lands on it. A taken or refused slug shows the API's sentence.
  const forkName = el("input", { id: "fork-name", placeholder: "name (optional)" });
  const forkSlug = el("input", { id: "fork-slug", required: true, pattern: SLUG_PATTERN, title: SLUG_RULE,
    placeholder: `${slug}-copy`, autocapitalize: "off", spellcheck: "false" });
  slugFollows(forkName, forkSlug);
  const forkProblem = el("div", { class: "fork-problem" });
  const forkButton = el("button", { type: "submit" }, "Fork");
  const fork = el("form", { class: "inline fork", "aria-label": "Fork this context", onsubmit: async (event) => {
    event.preventDefault();
    forkButton.disabled = true;
    forkProblem.replaceChildren();
    const body = { slug: forkSlug.value };
    if (forkName.value.trim()) body.name = forkName.value.trim();
    try {
      const made = await (await api(`${base}/fork`, { method: "POST", body })).json();
      location.hash = `#/context?ctx=${encodeURIComponent(made.slug)}`;
    } catch (error) {
      showError(forkProblem, error);
    } finally {
      forkButton.disabled = false;
    }
  } }, el("span", { class: "pair" }, el("label", { for: "fork-name" }, "Fork's name"), forkName),
  el("span", { class: "pair" }, el("label", { for: "fork-slug" }, "slug"), forkSlug), forkButton);

  // The heading is the context's name (its slug until it is known), the slug beside it.
  const name = el("span", { class: "name" }, slug);
  const slugNote = el("span", { class: "muted slug", hidden: true }, slug);
  const named = (ctx) => {
    name.textContent = ctx.name || slug;
    slugNote.hidden = !ctx.name || ctx.name === slug;
    show.title(ctx.name || slug);
  };
  const link = (route, text) => el("a", { href: `#/${route}?ctx=${encodeURIComponent(slug)}` }, text);
  show(el("h1", {}, name, " ", slugNote),
    el("nav", { class: "context-nav", "aria-label": "This context" }, link("ask", "Ask"), link("knowledge", "Knowledge"),
      link("design", "Design"), link("tables", "Tables")),
    about, el("h2", {}, "Sources"), drop, uploads, sourceProblem,
    sourcesTable,
    connectorsSection(slug, () => { refresh(); describe(slug, base, about); }),
    el("h2", {}, "Curate"), curate, curateState,
    el("h2", {}, "Pack and restore"), pack, " ", el("label", { for: "restore-file" }, "restore a pack into this (empty) context "), restoreFile, packState,
    el("h2", {}, "Fork"),
    el("p", { class: "help" }, "A new context that starts as this one is now (its sources, manifest and live version); the two change apart from then on."),
    fork, forkProblem);
  try {
    await refresh();
    const ctx = await describe(slug, base, about);
    named(ctx);
    // A task started earlier (in another tab, or before a reload) is watched again; otherwise the
    // last curate's failed and skipped sources are shown with their reasons.
    if (ctx.is_curating && ctx.curate_task_id) watchCurate(ctx.curate_task_id);
    else if (ctx.is_restoring && ctx.restore_task_id) watchRestore(ctx.restore_task_id);
    else curateState.replaceChildren(lastFailures(await (await api(`${base}/curate`)).json()));
    if (ctx.is_importing && ctx.import_task_id && !watched.has(ctx.import_task_id)) {
      const item = el("li", {}, "an archive being expanded");
      uploads.append(item);
      expand(ctx.import_task_id, item).then(refresh).catch((error) => showError(sourceProblem, error));
    }
  } catch (error) {
    showError(show, error);
  }
}

function lastFailures(ledger) {
  const rows = Object.entries(ledger.failures || {});
  if (!rows.length) return "";
  return el("div", { class: "failures" }, el("p", {}, `The last curate (${ledger.live_version ?? "no version"}):`),
    rows.map(([path, why]) => el("p", { class: why.status === "failed" ? "error" : "muted" }, `${why.status}: ${path} (${why.reason})`)));
}

// The live version, the size of its knowledge, and the sample questions its last curate wrote (each
// one click from an answer).
async function describe(slug, base, about) {
  const [ctx, stats] = await Promise.all([api(base).then((r) => r.json()),
    api(`${base}/knowledge/stats`).then((r) => r.json()).catch(() => null)]);
  const ask = (q) => `#/ask?${new URLSearchParams({ ctx: slug, q })}`;
  about.replaceChildren(
    el("p", { class: "muted" }, ctx.queryable
      ? `live version ${ctx.live_version} · ${stats?.file_count ?? 0} knowledge files (${bytes(stats?.total_size ?? 0)})`
      : "not curated yet: upload sources, then curate"),
    ...(ctx.sample_queries?.length ? [el("h2", {}, "Try asking"), el("ul", { class: "samples" },
      ctx.sample_queries.slice(0, 5).map((q) => el("li", {}, el("a", { href: ask(q) }, q))))] : []));
  return ctx;
}

function curateSummary(task) {
  const out = task.output || {};
  const delta = out.delta || {};
  if (delta === "empty" || out.flipped === false) return el("p", { class: "summary" }, "nothing changed since the last curate");
  const parts = [el("p", { class: "summary" },
    `version ${out.live_version ?? "—"} · sources ${delta.new ?? 0} new, ${delta.changed ?? 0} changed, ${delta.deleted ?? 0} deleted · ` +
    `${delta.processed ?? 0} parsed · ${delta.chunks_created ?? 0} chunks created · ` +
    `${(delta.artifacts_created ?? 0) + (delta.artifacts_updated ?? 0)} artifacts (${delta.artifacts_created ?? 0} new)` +
    (delta.screened ? ` · ${delta.screened} screened` : ""))];
  const x = out.extraction;
  if (x) {
    parts.push(el("p", { class: "muted" }, `model ${x.model}: ${x.calls} calls (${x.cached} cached) · ` +
      `${x.input_tokens} in / ${x.output_tokens} out tokens${x.budget_exhausted ? " · token budget spent: the next curate finishes" : ""}`));
    for (const e of x.errors || []) parts.push(el("p", { class: "error" }, `${e.type} on ${e.source}: ${e.error}`));
  }
  for (const [path, why] of Object.entries(out.failures || {})) {
    parts.push(el("p", { class: why.status === "failed" ? "error" : "muted" }, `${why.status}: ${path} (${why.reason})`));
  }
  for (const [name, why] of Object.entries(out.artifacts_skipped_no_model || {})) parts.push(el("p", { class: "muted" }, `skipped ${name}: ${why}`));
  for (const warning of out.warnings || []) parts.push(el("p", { class: "muted" }, `warning: ${warning}`));
  return el("div", {}, parts);
}
