// A form over a JSON document (the manifest): an object is a fieldset, a scalar an input, a list of
// scalars one comma-separated input, a list of objects one fieldset per item with add and remove.
// Every control carries the document path the API uses in its errors (`a.b[0].c`), so a problem is
// shown at its field; a path the document lacks (a required field left out) is shown on the nearest
// fieldset that exists. With the document's JSON Schema, an enumerated field is a choice and each
// object offers the optional fields it does not have yet.

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

  plain(s) {
    while (s && s.$ref) s = this.defs[s.$ref.split("/").pop()];
    if (s?.anyOf) {
      const alternatives = s.anyOf.map((a) => this.plain(a)).filter((a) => a && a.type !== "null");
      if (alternatives.length === 1) return { ...alternatives[0], nullable: true, default: s.default };
    }
    return s || null;
  }

  child(s, key) {
    if (!s) return null;
    return this.plain(typeof key === "number" ? s.items : s.properties?.[key]);
  }

  initial(s) {
    if (s?.default !== undefined && s.default !== null) return structuredClone(s.default);
    if (s?.properties) return Object.fromEntries((s.required || []).map((k) => [k, this.initial(this.child(s, k))]));
    if (s?.enum) return s.enum[0];
    return { string: "", integer: 0, number: 0, boolean: false, array: [], object: {} }[s?.type] ?? "";
  }
}

function blank(like) {
  if (Array.isArray(like)) return [];
  if (like && typeof like === "object") return Object.fromEntries(Object.entries(like).map(([k, v]) => [k, blank(v)]));
  return typeof like === "number" ? 0 : typeof like === "boolean" ? false : "";
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

  set(parts, value) {
    let at = this.document;
    for (const part of parts.slice(0, -1)) at = at[part];
    at[parts[parts.length - 1]] = value;
    this.onChange();
  }

  node(value, parts, path, schema) {
    const listOfObjects = Array.isArray(value) && (value.some((v) => v && typeof v === "object")
      || this.schema.child(schema, 0)?.type === "object" || this.schema.child(schema, 0)?.properties);
    if (listOfObjects) return this.list(value, parts, path, schema);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const legend = parts.length ? el("legend", {}, label(parts[parts.length - 1])) : null;
      return el("fieldset", { dataset: { path } }, legend,
        Object.entries(value).map(([key, v]) => this.node(v, [...parts, key], join(path, key), this.schema.child(schema, key))),
        this.addField(value, path, schema));
    }
    return this.scalar(value, parts, path, schema);
  }

  // The optional fields the schema allows here and the document does not have yet.
  addField(value, path, schema) {
    const missing = Object.keys(schema?.properties || {}).filter((key) => !(key in value));
    if (!missing.length) return null;
    const choose = el("select", { class: "add-field", "aria-label": `add a field to ${path || "the manifest"}` },
      el("option", { value: "" }, "add a field…"), missing.map((key) => el("option", { value: key }, label(key))));
    choose.addEventListener("change", () => {
      if (!choose.value) return;
      value[choose.value] = this.schema.initial(this.schema.child(schema, choose.value));
      this.onChange();
      this.render();
      this.at(join(path, choose.value))?.focus();
    });
    return choose;
  }

  list(items, parts, path, schema) {
    const itemSchema = this.schema.child(schema, 0);
    const add = el("button", { type: "button", class: "small", onclick: () => {
      items.push(items.length ? blank(items[items.length - 1]) : this.schema.initial(itemSchema) || {});
      this.onChange();
      this.render();
    } }, `add to ${label(parts[parts.length - 1])}`);
    return el("fieldset", { class: "list", dataset: { path } }, el("legend", {}, label(parts[parts.length - 1])),
      items.map((item, i) => {
        const entry = this.node(item, [...parts, i], join(path, i), itemSchema);
        const name = item && typeof item === "object" && typeof item.name === "string" && item.name ? ` ${item.name}` : "";
        entry.querySelector("legend")?.append(name, " ", el("button", { type: "button", class: "small",
          "aria-label": `remove ${label(parts[parts.length - 1])} #${i + 1}`, onclick: () => {
            items.splice(i, 1);
            this.onChange();
            this.render();
          } }, "remove"));
        return entry;
      }), add);
  }

  scalar(value, parts, path, schema) {
    const id = `field-${++counter}`;
    const key = parts[parts.length - 1];
    let input;
    if (schema?.enum) {  // a choice; a value outside it stays shown (the server will say why)
      const choices = [...schema.enum, ...(schema.enum.includes(value) || value === null ? [] : [value])];
      input = el("select", { id, onchange: () => this.set(parts, input.value === "" ? null : input.value) },
        schema.nullable || value === null ? el("option", { value: "", selected: value === null }, "(none)") : null,
        choices.map((c) => el("option", { value: c, selected: c === value }, String(c))));
    } else if (typeof value === "boolean") {
      input = el("input", { type: "checkbox", id, checked: value, onchange: () => this.set(parts, input.checked) });
    } else if (typeof value === "number") {
      input = el("input", { type: "number", id, value, step: "any",
        onchange: () => this.set(parts, input.value === "" ? null : Number(input.value)) });
    } else if (Array.isArray(value)) {  // a list of strings or numbers: one comma-separated field
      const numbers = value.length > 0 && value.every((v) => typeof v === "number");
      input = el("input", { id, value: value.join(", "), onchange: () => {
        const items = input.value.split(",").map((s) => s.trim()).filter(Boolean);
        this.set(parts, numbers ? items.map(Number) : items);
      } });
    } else if (typeof value === "string" && (value.length > 80 || value.includes("\n"))) {
      input = el("textarea", { id, rows: 3, onchange: () => this.set(parts, input.value) }, value);
    } else {
      input = el("input", { id, value: value ?? "", placeholder: value === null ? "(none)" : null,
        onchange: () => this.set(parts, input.value === "" && value === null ? null : input.value) });
    }
    input.dataset.path = path;
    return el("div", { class: "field" }, el("label", { for: id }, label(key)), input);
  }

  at(path) {
    return [...this.root.querySelectorAll("[data-path]")].find((n) => n.dataset.path === path) || null;
  }

  // Each problem at its field (or the nearest fieldset that exists); returns how many found no place.
  showProblems(problems) {
    this.root.querySelectorAll(".field-error").forEach((e) => e.remove());
    this.root.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
    let unplaced = 0;
    for (const problem of problems) {
      const wanted = problem.path || "";
      let path = wanted;
      let target = this.at(path);
      while (!target && path !== "") {
        path = parentOf(path);
        target = this.at(path);
      }
      if (!target) {
        unplaced += 1;
        continue;
      }
      const missing = path !== wanted ? `${wanted.slice(path.length).replace(/^\./, "")}: ` : "";
      const message = el("p", { class: "field-error error", id: `error-${++counter}` }, `${missing}${problem.message}`);
      if (target.tagName === "FIELDSET") {
        const legend = target.querySelector(":scope > legend");
        if (legend) legend.after(message); else target.prepend(message);
        target.setAttribute("aria-invalid", "true");
      } else {
        target.after(message);
        target.setAttribute("aria-invalid", "true");
        target.setAttribute("aria-describedby", message.id);
      }
    }
    return unplaced;
  }
}
