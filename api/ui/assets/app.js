// The dashboard shell: a router over /ui/<page> (History API), the live feed (server-sent events
// from /ui/live) and the life cycle of the current page (render, live updates, refresh, teardown).

import { fill, el, link } from "./util.js";

const PAGES = [
  [/^$/, "queues"],
  [/^queues$/, "queues"],
  [/^jobs$/, "jobs"],
  [/^jobs\/([^/]+)\/([^/]+)$/, "job"],
  [/^cycles$/, "cycles"],
  [/^cycles\/([0-9]+)$/, "cycle"],
  [/^nodes$/, "nodes"],
];
// (the server answers 404 for any other /ui/ path: PAGES in api/ui/__init__.py)
const REFRESH_MIN_MS = 2000; // a page re-reads the API at most this often on live cycles

const main = document.getElementById("main");
const status = document.getElementById("live-status");
export const config = {
  jaegerUrl: document.querySelector('meta[name="fumarole-jaeger-url"]')?.content || "http://localhost:16686",
};

let current = null; // {name, page, controller, lastRefresh, pendingRefresh, renderMs}
let lastCycle = 0;
let generation = 0;

function route(pathname) {
  const tail = pathname.replace(/^\/ui\/?/, "").replace(/\/$/, "");
  for (const [re, name] of PAGES) {
    const m = re.exec(tail);
    if (!m) continue;
    try {
      return { name, params: m.slice(1).map(decodeURIComponent) };
    } catch {
      // a malformed % escape (a truncated or hand-edited link): say so instead of a blank page
      return { name: "missing", params: [tail], missing: { kind: "bad-escape" } };
    }
  }
  return { name: "missing", params: [tail], missing: { kind: "page" } };
}

export function navigate(href, { replace = false } = {}) {
  const url = new URL(href, location.href);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  show();
}

/** Change the page's query string without a new history entry or a reload of the page. */
export function setQuery(values) {
  const url = new URL(location.href);
  for (const [k, v] of Object.entries(values)) {
    if (v === "" || v === null || v === undefined) url.searchParams.delete(k);
    else url.searchParams.set(k, String(v));
  }
  history.replaceState(null, "", url);
}

async function show() {
  const gen = ++generation;
  const t0 = performance.now();
  if (current) {
    current.controller.abort();
    current.page?.destroy?.();
  }
  const { name, params, missing } = route(location.pathname);
  for (const a of document.querySelectorAll("[data-nav]")) {
    const on = a.dataset.nav === name || a.dataset.nav === `${name}s`;
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  delete main.dataset.ready;
  delete main.dataset.refreshed;
  fill(main, el("p", { class: "loading", text: "Loading…" }));
  const controller = new AbortController();
  current = { name, path: location.pathname + location.search, page: null, controller, lastRefresh: performance.now(), pendingRefresh: null };
  try {
    const module = await import(`./pages/${name === "missing" ? "missing" : name}.js`);
    const ctx = {
      params, query: new URLSearchParams(location.search), signal: controller.signal, config, lastCycle, missing,
    };
    let page;
    try {
      page = await module.render(main, ctx);
    } catch (err) {
      // a job or a cycle the log does not hold: the "no such …" page, with ways back
      if (err.status !== 404 || (name !== "job" && name !== "cycle")) throw err;
      if (gen !== generation) return;
      const miss = await import("./pages/missing.js");
      page = await miss.render(main, { ...ctx, missing: { kind: name, detail: err.message } });
    }
    if (gen !== generation) return;
    current.page = page || {};
    if (source && source.readyState === EventSource.OPEN) clearStale();
    document.title = `${main.querySelector("h1")?.textContent || "Dashboard"} · Fumarole`;
    markReady(t0);
    showTarget();
  } catch (err) {
    if (gen !== generation || err.name === "AbortError") return;
    fill(main, el("div", { class: "error", role: "alert" },
      el("h1", { text: "Could not load this page" }), el("p", { text: String(err.message || err) }),
      el("p", { class: "muted" }, "The page loads again by itself once the API answers (it retries when the live feed reconnects). ",
        el("button", { type: "button", id: "retry", class: "linkish", on: { click: () => show() } }, "Retry now"), " or go to ",
        link("/ui/queues", "the queues"), ".")));
    main.dataset.ready = "error";
    current.failed = true;
  }
}

/** An address with a #fragment (a pod's row on its job's page): scroll to that element and give it the
 * keyboard focus, once the page is drawn (the browser's own jump happens before the page exists). */
function showTarget({ jump = true } = {}) {
  if (!location.hash) return;
  let id;
  try { id = decodeURIComponent(location.hash.slice(1)); } catch { return; }
  const t = document.getElementById(id);
  if (!t || !main.contains(t)) return;
  for (const old of main.querySelectorAll(".targeted")) old.classList.remove("targeted");
  t.classList.add("targeted");
  if (!t.hasAttribute("tabindex")) t.setAttribute("tabindex", "-1");
  if (!jump) return; // a live refresh redrew the row: marked again, not scrolled to
  t.scrollIntoView({ block: "center" });
  t.focus({ preventScroll: true });
}

// ---------------------------------------------------------------- stale data
// When a re-read fails, or the live feed is down, what the page shows may be out of date: a banner
// says so (and since when); it goes once a re-read succeeds with the feed up.
const banner = el("p", { id: "stale", class: "stale", role: "status", hidden: true });
main.before(banner);
let staleSince = null;

function markStale(why) {
  if (!current || current.failed || main.dataset.ready !== "1") return;
  if (staleSince === null) staleSince = new Date();
  main.dataset.stale = "1";
  banner.hidden = false;
  banner.textContent = `Possibly out of date: ${why}. What is shown was read at ${staleSince.toLocaleTimeString()} or before.`;
}

function clearStale() {
  staleSince = null;
  delete main.dataset.stale;
  banner.hidden = true;
}

let firstShow = true;

function markReady(t0) {
  const now = performance.now();
  // render time: from the start of the navigation (first load: HTML, modules, API reads, drawing)
  // or of the route change
  main.dataset.renderMs = String(Math.round(firstShow ? now : now - t0));
  firstShow = false;
  main.dataset.ready = "1";
  current.renderMs = now - t0;
  performance.mark("fumarole:rendered");
}

async function refresh() {
  const c = current;
  if (!c || !c.page?.refresh || c.refreshing) return;
  c.refreshing = true;
  c.lastRefresh = performance.now();
  const focused = focusKey();
  // what the user opened stays open: <details> with an id, reopened after the redraw
  const opened = [...main.querySelectorAll("details[id][open]")].map((d) => d.id);
  try {
    const t0 = performance.now();
    await c.page.refresh();
    c.renderMs = performance.now() - t0; // the next re-read waits 10 times as long as this one took
    for (const id of opened) { const d = document.getElementById(id); if (d) d.open = true; }
    showTarget({ jump: false });
    main.dataset.refreshed = String(Number(main.dataset.refreshed || 0) + 1);
    if (focused && !main.contains(document.activeElement)) refocus(focused);
    if (source && source.readyState === EventSource.OPEN) clearStale();
  } catch (err) {
    if (err.name !== "AbortError") {
      console.warn("refresh failed:", err.message || err);
      markStale("the API did not answer the last re-read");
    }
  } finally {
    c.refreshing = false;
  }
}

// A refresh redraws part of the page: keep the keyboard focus on the same link or control.
function focusKey() {
  const a = document.activeElement;
  if (!a || !main.contains(a) || a === main) return null;
  if (a.id) return `#${CSS.escape(a.id)}`;
  if (a.getAttribute("href")) return `[href="${CSS.escape(a.getAttribute("href"))}"]`;
  if (a.dataset.key) return `[data-key="${CSS.escape(a.dataset.key)}"]`;
  return null;
}

function refocus(selector) {
  const t = main.querySelector(selector);
  if (!t) return;
  if (t.tabIndex < 0 && !t.hasAttribute("tabindex")) t.setAttribute("tabindex", "-1"); // a row reached by its #id
  t.focus({ preventScroll: true });
}

function scheduleRefresh() {
  const c = current;
  if (!c || !c.page?.refresh || c.pendingRefresh || document.hidden) return;
  // big pages re-read less often: at least 10 times their own render time apart
  const gap = Math.max(REFRESH_MIN_MS, 10 * (c.renderMs || 0));
  const wait = Math.max(0, c.lastRefresh + gap - performance.now());
  c.pendingRefresh = setTimeout(() => { c.pendingRefresh = null; if (c === current) refresh(); }, wait);
}

// ---------------------------------------------------------------- live feed
// One EventSource at a time. When it fails (the server stopped or restarted, the stream ended, or
// the server answered 401/429/503, after which an EventSource gives up for good) it is closed and
// opened again after a backoff: 1 s doubling up to 30 s, with jitter, or the server's Retry-After.
// Before each new attempt a HEAD /ui/live (which takes no slot on the server) tells whether a
// stream would be accepted; 401 means the session ended: the browser goes to log in again. Each
// `hello` carries the server's last cycle: the page catches up on the cycles it missed
// (page.catchUp, which re-reads them from the REST API), or, after a reconnection, re-reads the API.

const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30000;
let source = null;
let backoff = BACKOFF_MIN_MS;
let retryTimer = null;
let connectedOnce = false;

function setStatus(text, state) {
  status.textContent = text;
  status.dataset.state = state;
}

function caughtUp(lastServerCycle, reconnected) {
  if (current?.failed) { show(); return; } // an error page: the API answers again, load the page
  if (reconnected) clearStale();
  const page = current?.page;
  const warn = (err) => { if (err.name !== "AbortError") console.warn("catching up failed:", err.message || err); };
  if (page?.catchUp) page.catchUp(lastServerCycle).catch(warn);
  else if (reconnected && page?.resync) page.resync().catch(warn);
  else if (reconnected) scheduleRefresh();
}

function connect() {
  retryTimer = null;
  source = new EventSource("/ui/live");
  source.addEventListener("hello", (e) => {
    const hello = JSON.parse(e.data);
    const reconnected = connectedOnce;
    connectedOnce = true;
    backoff = BACKOFF_MIN_MS;
    lastCycle = hello.last_cycle;
    setStatus(`live · cycle ${lastCycle}`, "live");
    caughtUp(lastCycle, reconnected);
  });
  source.addEventListener("cycle", (e) => {
    const row = JSON.parse(e.data);
    lastCycle = Math.max(lastCycle, row.cycle);
    setStatus(`live · cycle ${lastCycle}`, "live");
    current?.page?.onCycle?.(row);
    scheduleRefresh();
  });
  source.addEventListener("resync", () => {
    // this browser fell behind and lost some cycles: the page re-reads what it shows
    if (current?.page?.resync) current.page.resync().catch((err) => console.warn("resync failed:", err.message || err));
    else scheduleRefresh();
  });
  source.addEventListener("error", () => {
    source?.close();
    source = null;
    markStale("the live feed is disconnected");
    scheduleReconnect();
  });
}

function scheduleReconnect(atLeastMs = 0) {
  if (retryTimer) return;
  const delay = Math.max(atLeastMs, backoff * (0.75 + Math.random() * 0.5));
  backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
  setStatus(`reconnecting in ${Math.max(1, Math.round(delay / 1000))} s…`, "down");
  retryTimer = setTimeout(probe, delay);
}

async function probe() {
  retryTimer = null;
  let resp;
  try {
    resp = await fetch("/ui/live", { method: "HEAD", cache: "no-store" });
  } catch {
    scheduleReconnect(); // the server is not there (yet)
    return;
  }
  if (resp.status === 401) {
    location.assign(`/ui/login?next=${encodeURIComponent(location.pathname + location.search)}`);
    return;
  }
  if (!resp.ok) {
    const after = Number(resp.headers.get("Retry-After"));
    scheduleReconnect(Number.isFinite(after) && after > 0 ? after * 1000 : 0);
    return;
  }
  connect();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest?.("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  if (a.target || a.origin !== location.origin || !a.pathname.startsWith("/ui/") || a.pathname.startsWith("/ui/assets/")) return;
  e.preventDefault();
  if (a.hash && a.pathname === location.pathname && a.search === location.search) {
    // a link within the page (a pod's row): no re-read, only the jump
    history.pushState(null, "", a.href);
    showTarget();
    return;
  }
  navigate(a.href);
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
});
window.addEventListener("popstate", () => {
  // back/forward between two places of the same page (#fragments): jump, do not re-read
  if (current && current.path === location.pathname + location.search) showTarget();
  else show();
});
document.addEventListener("visibilitychange", () => { if (!document.hidden) scheduleRefresh(); });

connect();
show();
