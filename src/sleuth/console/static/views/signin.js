import { api, TOKEN } from "../lib/api.js";
import { el, titled, view } from "../lib/dom.js";

// With `sleuth serve --auth` the key typed in is sent once; only the login token it returns is kept.
export function signInView(signedIn) {
  const key = el("input", { id: "key", type: "password", autocomplete: "off", required: true });
  const message = el("p", { class: "muted" }, "This server needs an API key (sleuth keys create).");
  const form = el("form", { class: "ask", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const answer = await (await api("/auth/login", { method: "POST", body: { api_key: key.value },
        signingIn: true })).json();
      sessionStorage.setItem(TOKEN, answer.token);
      key.value = "";
      signedIn();
    } catch (error) {
      message.replaceChildren(el("span", { class: "error", role: "alert", dataset: error.code ? { code: error.code } : {} },
        String(error.message || error)));
    }
  } }, el("label", { for: "key" }, "API key"), key, el("button", { type: "submit" }, "Sign in"), message);
  view.replaceChildren(el("h1", {}, "Sign in"), form);
  titled("Sign in");
  key.focus();
}
