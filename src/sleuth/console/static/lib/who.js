// Who is signed in, and Sign out, in the header: shown only when the server checks keys (`sleuth serve
// --auth`, or any address but loopback). Sign out ends the login token on the server, not only here.

import { api, TOKEN } from "./api.js";
import { el } from "./dom.js";

const who = document.getElementById("who");

export async function showWho() {
  if (!sessionStorage.getItem(TOKEN)) {
    who.hidden = true;
    who.replaceChildren();
    return;
  }
  try {
    const me = await (await api("/auth")).json();
    who.replaceChildren(el("span", { class: "muted" }, "signed in as "), el("strong", {}, me.user), " ",
      el("button", { type: "button", class: "small", onclick: signOut }, "Sign out"));
    who.hidden = false;
  } catch (_) {
    who.hidden = true;  // a dead token: the next request asks for a key
  }
}

async function signOut() {
  try {
    await api("/auth/logout", { method: "POST" });
  } catch (_) { /* ended already: signed out either way */ }
  sessionStorage.removeItem(TOKEN);
  who.hidden = true;
  who.replaceChildren();
  dispatchEvent(new Event("sleuth:sign-in"));
}
