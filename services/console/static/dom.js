// Small helpers the views share: building elements (text only, never HTML), the API, notices.

/** An element with attributes and children; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A status or event status as a coloured badge. */
export const badge = (text) => h("span", { class: `badge ${text}` }, text);

/** The operator's name and operate token, kept for this browser tab. */
export const operator = {
  get name() {
    return sessionStorage.getItem("operator") ?? "";
  },
  get token() {
    return sessionStorage.getItem("operateToken") ?? "";
  },
  set(name, token) {
    sessionStorage.setItem("operator", name);
    sessionStorage.setItem("operateToken", token);
  },
};

/** A JSON API call; a refusal throws its structured error ({ code, message }). */
export async function api(path, { method = "GET", body } = {}) {
  const headers = { accept: "application/json" };
  if (operator.token) headers["x-operate-token"] = operator.token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) throw Object.assign(new Error(json.error?.message ?? res.statusText), json.error ?? {});
  return json;
}

/** Says something above the view: an error (red) or a done action (green). */
export function notify(text, ok = false) {
  const el = document.getElementById("notice");
  el.textContent = text;
  el.className = ok ? "notice ok" : "notice";
  el.hidden = !text;
}

/** Says an API error with its code. */
export const notifyError = (err) => notify(`${err.code ?? "ERROR"}: ${err.message}`);

export const fmtTime = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");
export const fmtUsd = (n) => `$${Number(n ?? 0).toFixed(4)}`;
