// The Cache Explorer, part 5: the layout, selection, keys, the address (#r=N, #code-X), and a
// live page's polling: it asks its endpoint with If-None-Match every POLL_MS and re-renders
// only what changed, keeping the user's selection, filter and scroll positions.

const POLL_MS = 400;
const POLL_MAX_MS = 3000;

function layout() {
  const app = document.getElementById("app");
  UI.top = h("header", { class: "top" });
  UI.liveBadge = h("span", { class: "badge live", hidden: true, "data-role": "live" }, "");
  UI.search = h("input", {
    type: "search",
    placeholder: "#request, code, model…  ( / )",
    "aria-label": "search requests",
    oninput: onSearch,
  });
  UI.lossyButton = h(
    "button",
    {
      type: "button",
      "aria-pressed": "false",
      "data-role": "lossy",
      title: "show only requests that lost something (f)",
      onclick: () => {
        S.filterLossy = !S.filterLossy;
        refilter();
      },
    },
    "lost something",
  );
  UI.codeChip = h("span", null);
  UI.railCount = h("span", { class: "count" });
  UI.railSpacer = h("div", { class: "rail-spacer" });
  UI.railList = h("div", { class: "rail-list", tabindex: "0", role: "listbox", "aria-label": "requests" }, UI.railSpacer);
  UI.railList.addEventListener("click", onRailClick);
  UI.railList.addEventListener("scroll", () => requestAnimationFrame(renderRail), { passive: true });
  UI.tabs = {};
  const tab = (key, label) => {
    UI.tabs[key] = h("button", { type: "button", role: "tab", "data-tab": key, onclick: () => setTab(key) }, label);
    return UI.tabs[key];
  };
  UI.pane = h("div", { class: "pane", role: "tabpanel" });
  UI.main = h("main", { class: "main" }, h("nav", { class: "tabs", role: "tablist" }, tab("request", "Request"), tab("overview", "Overview"), tab("glossary", "Glossary")), UI.pane);
  UI.toast = h("div", { class: "toast", hidden: true, "data-role": "toast" });
  app.replaceChildren(
    UI.top,
    h(
      "div",
      { class: "body" },
      h(
        "aside",
        { class: "rail" },
        h("div", { class: "rail-tools" }, UI.search, h("div", { class: "row" }, UI.lossyButton, UI.codeChip, UI.railCount)),
        UI.railList,
        h("div", { class: "rail-foot keys" }, h("kbd", null, "j"), "/", h("kbd", null, "k"), " move · ", h("kbd", null, "n"), "/", h("kbd", null, "p"), " next/prev loss · ", h("kbd", null, "f"), " filter · ", h("kbd", null, "/"), " search"),
      ),
      UI.main,
    ),
    UI.toast,
  );
  window.addEventListener("resize", () => requestAnimationFrame(renderRail));
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", onCodeLink);
  window.addEventListener("hashchange", fromHash);
}

function setTab(key) {
  S.tab = key;
  renderMain();
  UI.main.scrollTop = 0;
}

let lastMain = null;

/** Re-render the main pane; unless forced, only when what it shows changed. */
function renderMain(force = true) {
  const r = S.sel === null ? null : S.byIndex.get(S.sel);
  const stamp =
    S.tab === "request"
      ? JSON.stringify([r || null, r ? r._conv.reqs.length : 0, S.pickedSegment], (k, v) => (k.startsWith("_") ? undefined : v))
      : null;
  if (!force && stamp !== null && stamp === lastMain) return;
  lastMain = stamp;
  for (const [key, button] of Object.entries(UI.tabs)) button.setAttribute("aria-selected", key === S.tab ? "true" : "false");
  const keep = UI.main.scrollTop;
  const content = S.tab === "overview" ? overviewPane() : S.tab === "glossary" ? glossaryPane() : requestPane();
  UI.pane.replaceChildren(content);
  UI.main.scrollTop = keep;
}

function select(indexValue, { user = false, reveal = false } = {}) {
  if (!S.byIndex.has(indexValue)) return;
  const changed = S.sel !== indexValue;
  S.sel = indexValue;
  if (user) S.userPicked = true;
  if (reveal) {
    const r = S.byIndex.get(indexValue);
    S.collapsed.delete(r._conv.key);
    if (!passes(r)) {
      S.filterLossy = false;
      S.codeFilter = null;
    }
    buildRows();
  }
  if (changed) S.pickedSegment = null;
  if (user && S.tab !== "request") S.tab = "request";
  const at = rowOf(indexValue);
  if (at >= 0) scrollRowIntoView(at);
  renderRail();
  renderMain(changed || user);
  if (user) history.replaceState(null, "", `#r=${indexValue + 1}`);
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const inField = event.target instanceof HTMLInputElement;
  if (inField) {
    if (event.key === "Escape") {
      UI.search.value = "";
      onSearch();
      UI.railList.focus();
    } else if (event.key === "Enter" || event.key === "ArrowDown") {
      UI.railList.focus();
      event.preventDefault();
    }
    return;
  }
  const page = Math.max(1, Math.floor(UI.railList.clientHeight / ROW) - 1);
  const actions = {
    ArrowDown: () => moveSelection(1),
    j: () => moveSelection(1),
    ArrowUp: () => moveSelection(-1),
    k: () => moveSelection(-1),
    PageDown: () => moveSelection(page),
    PageUp: () => moveSelection(-page),
    Home: () => moveToEnd(false),
    End: () => moveToEnd(true),
    n: () => jumpLossy(true),
    p: () => jumpLossy(false),
    N: () => jumpLossy(false),
    a: () => {
      const r = S.byIndex.get(S.sel);
      if (r && r.parent !== null) select(r.parent, { user: true, reveal: true });
    },
    f: () => {
      S.filterLossy = !S.filterLossy;
      refilter();
    },
    "/": () => UI.search.focus(),
    1: () => setTab("request"),
    2: () => setTab("overview"),
    3: () => setTab("glossary"),
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

function onCodeLink(event) {
  const link = event.target.closest("a[data-code]");
  if (!link) return;
  event.preventDefault();
  showCode(link.dataset.code);
}

function showCode(code) {
  S.tab = "glossary";
  renderMain();
  history.replaceState(null, "", `#code-${code}`);
  const entry = document.getElementById(`code-${code}`);
  if (entry) {
    entry.classList.add("flash");
    entry.scrollIntoView({ block: "start" });
  }
}

function fromHash() {
  const hash = decodeURIComponent(location.hash.slice(1));
  const code = /^code-(.+)$/.exec(hash);
  if (code && S.cfg.codes[code[1]]) {
    showCode(code[1]);
    return true;
  }
  const req = /^r=(\d+)$/.exec(hash);
  if (req && S.byIndex.has(Number(req[1]) - 1)) {
    select(Number(req[1]) - 1, { user: true, reveal: true });
    return true;
  }
  return false;
}

/** The request the page opens on: the one that lost the most (the earliest of equals), else
 * the first refused or flagged one, else the first. */
function firstPick() {
  let best = null;
  for (const r of S.reqs) {
    if ((r.lostTokens || 0) > 0 && (best === null || r.lostTokens > best.lostTokens)) best = r;
  }
  if (best) return best.index;
  const lossy = S.reqs.find((r) => r._lossy);
  return lossy ? lossy.index : S.reqs.length ? S.reqs[0].index : null;
}

function newest() {
  return S.reqs.length ? S.reqs[S.reqs.length - 1].index : null;
}

let toastTimer = null;

function notice(text) {
  UI.toast.textContent = text;
  UI.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    UI.toast.hidden = true;
  }, 3500);
}

/** A new report from the live endpoint: the index anew, the selection kept. */
function update(data) {
  const before = S.reqs.length;
  index(data);
  buildRows();
  renderTop();
  const added = S.reqs.length - before;
  if (!S.byIndex.has(S.sel)) {
    S.sel = null;
    S.userPicked = false;
  }
  if (!S.userPicked) {
    S.sel = newest();
    const at = rowOf(S.sel);
    if (at >= 0) scrollRowIntoView(at);
  } else if (added > 0) {
    notice(`${added} new request(s) — End shows the newest`);
  }
  renderRail();
  renderMain(S.tab !== "request");
  document.getElementById("app").dataset.requests = String(S.reqs.length);
}

function setLive(ok, detail) {
  const badge = UI.liveBadge;
  badge.hidden = false;
  badge.classList.toggle("down", !ok);
  const when = new Date().toLocaleTimeString();
  badge.textContent = ok ? `● live · ${S.userPicked ? "" : "following newest · "}checked ${when}` : `● disconnected · retrying (${detail})`;
}

async function poll(delay) {
  let next = POLL_MS;
  try {
    const headers = S.version ? { "If-None-Match": S.version } : {};
    const response = await fetch(S.cfg.live, { headers, cache: "no-store" });
    if (response.status === 200) {
      const data = await response.json();
      S.version = response.headers.get("ETag");
      update(data);
    } else if (response.status !== 304) {
      throw new Error(`status ${response.status}`);
    }
    setLive(true);
  } catch (error) {
    next = Math.min(POLL_MAX_MS, delay * 2);
    setLive(false, error instanceof Error ? error.message : String(error));
  }
  setTimeout(() => poll(next), next);
}

function start() {
  const app = document.getElementById("app");
  S.cfg = readJson("dsh-config");
  S.version = S.cfg.version || null;
  layout();
  index(readJson("dsh-report"));
  buildRows();
  renderTop();
  if (!fromHash()) {
    S.sel = S.cfg.live ? newest() : firstPick();
    const at = rowOf(S.sel);
    if (at >= 0) scrollRowIntoView(at);
    renderRail();
    renderMain();
  }
  app.dataset.requests = String(S.reqs.length);
  app.dataset.state = "ready";
  if (S.cfg.live) {
    setLive(true);
    setTimeout(() => poll(POLL_MS), POLL_MS);
  }
}

try {
  start();
} catch (error) {
  const app = document.getElementById("app");
  app.dataset.state = "failed";
  app.textContent = `The Cache Explorer could not start: ${error instanceof Error ? error.message : error}`;
  throw error;
}
