// Every call to the server goes through `api`: the login token on each request, the API's error
// envelope turned into an Error that keeps it, and a 401 that sends the person to sign in.

import { el } from "./dom.js";

// With `sleuth serve --auth` the console signs in through POST /auth/login: the key typed in is sent
// once and only the login token it returns is kept (sessionStorage, gone with the tab).
export const TOKEN = "sleuth.token";

export class Unauthenticated extends Error {}

// A task or a turn in one of these states will not change again.
export const TERMINAL = ["completed", "failed", "cancelled"];

// A request path is built from route parameters a shared link sets: a "." or ".." segment would let
// the link aim this person's credentials at another endpoint, so none is ever sent.
function checkedPath(path) {
  const route = path.split("?")[0];
  if (route.split("/").some((part) => [".", ".."].includes(decodeURIComponent(part)))) {
    throw new Error(`refused: the path ${route} has a "." or ".." segment`);
  }
  return path;
}

export function authHeaders() {
  const token = sessionStorage.getItem(TOKEN);
  return token ? { authorization: `Bearer ${token}` } : {};
}

export function apiUrl(path) {
  return `/api${checkedPath(path)}`;
}

export async function api(path, options = {}) {
  const form = options.body instanceof FormData;  // a multipart upload: the browser sets its own type
  const headers = { accept: "application/json", ...authHeaders(), ...(options.headers || {}) };
  if (options.body !== undefined && !form) headers["content-type"] = "application/json";
  const response = await fetch(`/api${checkedPath(path)}`, {
    ...options,
    headers,
    body: options.body === undefined || form ? options.body : JSON.stringify(options.body),
  });
  if (response.status === 401 && !options.signingIn) {
    sessionStorage.removeItem(TOKEN);
    throw new Unauthenticated("sign in with an API key");
  }
  if (!response.ok) throw failure(response.status, await response.text());
  return response;
}

// The API's error envelope as an Error that keeps it: its sentence for people, its code for machines
// (`error.code`, shown as the alert's `data-code`), or the status alone.
export function failure(status, text) {
  let envelope = null;
  try {
    envelope = JSON.parse(text);
  } catch (_) { /* not the envelope */ }
  const error = new Error(envelope?.message || `the server answered ${status}`);
  error.envelope = envelope;
  error.code = envelope?.code || null;
  return error;
}

// A view that meets a 401 asks the router for the sign-in form (an event, so no view imports the router).
export function showError(where, error) {
  if (error instanceof Unauthenticated) {
    dispatchEvent(new Event("sleuth:sign-in"));
    return;
  }
  const message = el("p", { class: "error", role: "alert", dataset: error.code ? { code: error.code } : {} },
    String(error.message || error));
  if (typeof where === "function") where(message);  // a view's `show`: only while it is still shown
  else where.replaceChildren(message);
}
