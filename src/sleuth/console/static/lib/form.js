// A form over a JSON document (the manifest): an object is a fieldset, a scalar an input, a list one
// entry per item with add and remove. Every control carries the document path the API uses in its
// errors (`a.b[0].c`), so a problem is shown at its field; a path the document lacks (a required field
// left out) is shown on the nearest fieldset that exists. The document's JSON Schema chooses each
// control (a choice for an enumerated field, a number field for a number even when it is null now)
// and offers, on each object, the optional fields it does not have yet.

import { el } from "./dom.js";

const join = (parent, key) => (typeof key === "number" ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key);
const label = (key) => (typeof key === "number" ? `#${key + 1}` : key.replaceAll("_", " "));
let counter = 0;

// `a.b[0].c` → `a.b[0]` → `a.b` → `a` → `` (the whole document)
function parentOf(path) {
  const match = path.match(/^(.*?)(\.[^.[\]]+|\[\d+\])$/);
  return match ? match[1] : "";
}

// The JSON Schema of one place in the document: `$ref`s followed, a nullable `anyOf` read as its type.
class Schema {
  constructor(root) {
    this.defs = root?.$defs || {};
    this.root = this.plain(root);
  }

  // A property's own `description` (the manifest field's help) is kept over the one of what it refers to.
  plain(s) {
    const description = s?.description;
    while (s && s.$ref) s = this.defs[s.$ref.split("/").pop()];
    if (s?.anyOf) {
      const alternatives = s.anyOf.map((a) => this.plain(a)).filter((a) => a && a.type !== "null");
      if (alternatives.length === 1) s = { ...alternatives[0], nullable: true, default: s.default };
    }
    return s ? { ...s, description: description ?? s.description } : null;
  }

  child(s, key) {
    if (!s) return null;
    return this.plain(typeof key === "number" ? s.items : s.properties?.[key]);
  }

  // A new value for a field or list item: its default, else the first choice, else empty of its type
  // (an object with its required fields).
  initial(s) {
    if (s?.default !== undefined && s.default !== null) return structuredClone(s.default);
    if (s?.enum) return s.enum[0];
    if (s?.properties) return Object.fromEntries((s.required || []).map((k) => [k, this.initial(this.child(s, k))]));
    return { string: "", integer: 0, number: 0, boolean: false, array: [] }[s?.type] ?? "";
  }
}

// What kind of value a place holds: from the schema where it says, else from the value itself.
function typeOf(value, schema) {
  if (schema?.type) return schema.type === "integer" ? "number" : schema.type;
  if (Array.isArray(value)) return "array";
  if (value === null) return "string";
  return typeof value === "object" ? "object" : typeof value;
}

export class JsonForm {
  constructor(document, schema = null, onChange = () => {}) {
    this.document = document;
    this.schema = new Schema(schema);
    this.onChange = onChange;
    this.root = el("div", { class: "json-form" });
    this.render();
  }

  render() {
    this.root.replaceChildren(this.node(this.document, [], "", this.schema.root));
  }

  changed(rerender = false) {
    this.onChange();
    if (rerender) this.render();
  }

  set(parts, value) {
    let at = this.document;
    for (const part of parts.slice(0, -1)) at = at[part];
    at[parts[parts.length - 1]] = value;
    this.changed();
  }

  node(value, parts, path, schema) {
    const kind = typeOf(value, schema);
    if (Array.isArray(value) || kind === "array") return this.list(value || [], parts, path, schema);
    if (value && typeof value === "object") {
      const legend = parts.length ? el("legend", {}, label(parts[parts.length - 1])) : null;
      const help = parts.length && typeof parts[parts.length - 1] !== "number" && schema?.description
        ? el("p", { class: "help" }, schema.description) : null;
      return el("fieldset", { dataset: { path } }, legend, help,
        Object.entries(value).map(([key, v]) => this.node(v, [...parts, key], join(path, key), this.schema.child(schema, key))),
        this.addField(value, path, schema));
    }
    return this.scalar(value, parts, path, schema);
  }

  // The optional fields the schema allows here and the document does not have yet: chosen, then added.
  addField(value, path, schema) {
    const missing = Object.keys(schema?.properties || {}).filter((key) => !(key in value));
    if (!missing.length) return null;
    const where = path || "the manifest";
    const choose = el("select", { class: "add-field", "aria-label": `field to add to ${where}` },
      missing.map((key) => el("option", { value: key }, label(key))));
    const add = el("button", { type: "button", class: "small", "aria-label": `add the field to ${where}`, onclick: () => {
      value[choose.value] = this.schema.initial(this.schema.child(schema, choose.value));
      this.changed(true);
      this.at(join(path, choose.value))?.focus();
    } }, "add field");
    return el("div", { class: "add" }, choose, " ", add);
  }

  list(items, parts, path, schema) {
    const itemSchema = this.schema.child(schema, 0);
    const name = label(parts[parts.length - 1]);
    const add = el("button", { type: "button", class: "small", onclick: () => {
      items.push(itemSchema ? this.schema.initial(itemSchema) : structuredClone(items[items.length - 1] ?? ""));
      if (!Array.isArray(this.valueAt(parts))) this.set(parts, items);  // a list that was null
      this.changed(true);
    } }, `add to ${name}`);
    const remove = (i) => el("button", { type: "button", class: "small", "aria-label": `remove ${name} #${i + 1}`, onclick: () => {
      items.splice(i, 1);
      this.changed(true);
    } }, "remove");
    return el("fieldset", { class: "list", dataset: { path } }, el("legend", {}, name),
      items.map((item, i) => {
        const entry = this.node(item, [...parts, i], join(path, i), itemSchema);
        if (entry.tagName === "FIELDSET") {
          const title = item && typeof item.name === "string" && item.name ? ` ${item.name}` : "";
          entry.querySelector("legend")?.append(title, " ", remove(i));
          return entry;
        }
        entry.append(remove(i));  // a scalar item: its own field, then its button
        return entry;
      }), add);
  }

  valueAt(parts) {
    return parts.reduce((at, part) => (at === null || at === undefined ? at : at[part]), this.document);
  }

  scalar(value, parts, path, schema) {
    const id = `field-${++counter}`;
    const key = parts[parts.length - 1];
    const kind = typeOf(value, schema);
    let input;
    if (schema?.enum) {  // a choice; a value outside it stays shown (the server will say why)
      const choices = [...schema.enum, ...(schema.enum.includes(value) || value === null ? [] : [value])];
      input = el("select", { id, onchange: () => this.set(parts, input.value === "" ? null : input.value) },
        schema.nullable || value === null ? el("option", { value: "", selected: value === null }, "(none)") : null,
        choices.map((c) => el("option", { value: c, selected: c === value }, String(c))));
    } else if (kind === "boolean") {
      input = el("input", { type: "checkbox", id, checked: value === true, onchange: () => this.set(parts, input.checked) });
    } else if (kind === "number") {
      input = el("input", { type: "number", id, value: value ?? "", step: "any", placeholder: value === null ? "(none)" : null,
        onchange: () => this.set(parts, input.value === "" ? null : Number(input.value)) });
    } else if (typeof value === "string" && (value.length > 80 || value.includes("\n"))) {
      input = el("textarea", { id, rows: 3, onchange: () => this.set(parts, input.value) }, value);
    } else {
      input = el("input", { id, value: value ?? "", placeholder: value === null ? "(none)" : null,
        onchange: () => this.set(parts, input.value === "" && value === null ? null : input.value) });
    }
    input.dataset.path = path;
    const help = typeof key !== "number" && schema?.description
      ? el("small", { class: "help", id: `${id}-help` }, schema.description) : null;
    if (help) input.setAttribute("aria-describedby", help.id);
    // A field being mended loses its error at once (the next save checks it again)
    const mended = () => {
      if (!input.hasAttribute("aria-invalid")) return;
      input.removeAttribute("aria-invalid");
      if (input.nextElementSibling?.classList.contains("field-error")) input.nextElementSibling.remove();
      if (help) input.setAttribute("aria-describedby", help.id); else input.removeAttribute("aria-describedby");
    };
    input.addEventListener("input", mended);
    input.addEventListener("change", mended);
    return el("div", { class: "field" }, el("label", { for: id }, label(key)), input, help);
  }

  at(path) {
    return [...this.root.querySelectorAll("[data-path]")].find((n) => n.dataset.path === path) || null;
  }

  // Each problem at its field, or on the nearest fieldset the document has (the root at the least).
  showProblems(problems) {
    this.root.querySelectorAll(".field-error").forEach((e) => e.remove());
    this.root.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
    for (const problem of problems) {
      const wanted = problem.path || "";
      let path = wanted;
      let target = this.at(path);
      while (!target && path !== "") {
        path = parentOf(path);
        target = this.at(path);
      }
      if (!target) continue;
      const missing = path !== wanted ? `${wanted.slice(path.length).replace(/^\./, "")}: ` : "";
      const message = el("p", { class: "field-error error", id: `error-${++counter}` }, `${missing}${problem.message}`);
      target.setAttribute("aria-invalid", "true");
      if (target.tagName === "FIELDSET") {
        const legend = target.querySelector(":scope > legend");
        if (legend) legend.after(message); else target.prepend(message);
      } else {
        target.after(message);
        target.setAttribute("aria-describedby", message.id);
      }
    }
  }
}
