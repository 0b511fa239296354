// The Cache Explorer, part 2: the rail (every request with its hit % and cause codes, the
// conversations and their branches as a tree) as a virtual list: only the rows in view exist.

const UI = {}; // the page's fixed elements, made once by layout()

function railRow(row, top) {
  if (row.kind === "conv") {
    const conv = row.conv;
    const t = conv.c.totals || {};
    const open = !S.collapsed.has(conv.key);
    return h(
      "div",
      {
        class: "rail-row conv",
        style: `top:${top}px`,
        "data-conv": conv.key,
        title: "Enter or click: fold or unfold this conversation",
      },
      h("span", { class: "caret" }, open ? "▾" : "▸"),
      h("span", null, `conversation ${conv.key}`),
      h(
        "span",
        { class: "meta" },
        `${row.shown === conv.reqs.length ? "" : `${row.shown} of `}${conv.reqs.length} req · eff ${fmtPct(conv.c.efficiency)}`,
        t.lostTokens ? ` · lost ${fmtN(t.lostTokens)}` : "",
      ),
    );
  }
  const r = row.r;
  const prompt = r.promptTokens || 0;
  const hit = Math.min(r.hitTokens || 0, prompt);
  const lost = Math.min(r.lostTokens || 0, Math.max(0, prompt - hit));
  const codes = [...r._codes.entries()].sort((a, b) => GRAVITY[b[1]] - GRAVITY[a[1]]);
  let summary;
  if (codes.length) {
    summary = codes.map(([code, sev], i) => [i ? " " : "", h("span", { class: sev }, code)]);
  } else if (r.parent === null) {
    summary = r.status >= 400 ? "refused" : "first";
  } else {
    summary = `${r.relation === "branch" ? "side call off" : r.relation} ${num(r.parent)}`;
  }
  const mini = h("span", { class: "mini", "aria-hidden": "true" });
  if (prompt) {
    mini.append(
      h("i", { style: `left:0;width:${(hit / prompt) * 100}%;background:var(--hit)` }),
      h("i", {
        style: `left:${(hit / prompt) * 100}%;width:${(lost / prompt) * 100}%;background:var(--lost)`,
      }),
    );
  }
  const title = [
    `${num(r.index)} · conversation ${r._conv.key}`,
    r.parent === null ? "first of its conversation" : `${relationWords(r)} ${num(r.parent)}`,
    `prompt ${fmtN(r.promptTokens)} · hit ${fmtN(r.hitTokens)} · lost ${fmtN(r.lostTokens)}`,
    ...codes.map(([code, sev]) => `${code} (${sev})`),
  ].join("\n");
  return h(
    "div",
    {
      class: `rail-row req${r.index === S.sel ? " sel" : ""}`,
      style: `top:${top}px`,
      "data-index": r.index,
      role: "option",
      "aria-selected": r.index === S.sel ? "true" : "false",
      title,
    },
    h("span", { style: `width:${r._depth * 12}px;flex:none` }),
    r._branch ? h("span", { class: "branch", title: "a branch: a side call off its parent" }, "↳") : null,
    h("span", { class: "num" }, num(r.index)),
    mini,
    h("span", { class: "pct" }, r.hitRate === null ? "–" : `${Math.round(r.hitRate * 100)}%`),
    h("span", { class: "codes" }, summary),
  );
}

function renderRail() {
  const list = UI.railList;
  UI.railSpacer.style.height = `${S.rows.length * ROW}px`;
  const top = list.scrollTop;
  const height = list.clientHeight || 600;
  const first = Math.max(0, Math.floor(top / ROW) - 8);
  const last = Math.min(S.rows.length, Math.ceil((top + height) / ROW) + 8);
  const made = [];
  for (let i = first; i < last; i++) made.push(railRow(S.rows[i], i * ROW));
  UI.railSpacer.replaceChildren(...made);
  const shown = S.rows.filter((row) => row.kind === "req").length;
  const active = filtering();
  UI.railCount.textContent = active
    ? `${fmtN(shown)} of ${fmtN(S.reqs.length)} requests shown`
    : `${fmtN(S.reqs.length)} requests in ${fmtN(S.convs.length)} conversation(s)`;
  UI.lossyButton.setAttribute("aria-pressed", S.filterLossy ? "true" : "false");
  UI.codeChip.replaceChildren(
    S.codeFilter
      ? h(
          "button",
          { type: "button", title: "stop filtering by this code", onclick: () => setCodeFilter(null) },
          `code: ${S.codeFilter} ✕`,
        )
      : "",
  );
}

function scrollRowIntoView(rowIndex) {
  if (rowIndex < 0) return;
  const list = UI.railList;
  const top = rowIndex * ROW;
  if (top < list.scrollTop) list.scrollTop = top;
  else if (top + ROW > list.scrollTop + list.clientHeight) {
    list.scrollTop = top + ROW - list.clientHeight;
  }
}

function onRailClick(event) {
  const el = event.target.closest(".rail-row");
  if (!el) return;
  if (el.dataset.conv !== undefined) {
    toggleConversation(el.dataset.conv);
    return;
  }
  select(Number(el.dataset.index), { user: true });
  UI.railList.focus({ preventScroll: true });
}

function toggleConversation(key) {
  if (S.collapsed.has(key)) S.collapsed.delete(key);
  else S.collapsed.add(key);
  buildRows();
  renderRail();
}

function setCodeFilter(code) {
  S.codeFilter = code;
  refilter();
}

function refilter() {
  buildRows();
  renderRail();
  const at = rowOf(S.sel);
  if (at >= 0) scrollRowIntoView(at);
}

/** Move the selection `step` request rows up or down the rail (as filtered and folded). */
function moveSelection(step) {
  const reqRows = [];
  S.rows.forEach((row, i) => {
    if (row.kind === "req") reqRows.push(i);
  });
  if (!reqRows.length) return;
  const at = rowOf(S.sel);
  let k = reqRows.indexOf(at);
  if (k < 0) k = step > 0 ? -1 : reqRows.length;
  k = Math.max(0, Math.min(reqRows.length - 1, k + step));
  select(S.rows[reqRows[k]].r.index, { user: true });
}

function moveToEnd(last) {
  const reqRows = S.rows.filter((row) => row.kind === "req");
  if (!reqRows.length) return;
  select((last ? reqRows[reqRows.length - 1] : reqRows[0]).r.index, { user: true });
}

/** The next (or previous) request that lost something, in rail order, ignoring the filter. */
function jumpLossy(forward) {
  const order = [];
  for (const conv of S.convs) for (const r of conv.reqs) order.push(r);
  const at = order.findIndex((r) => r.index === S.sel);
  const n = order.length;
  for (let step = 1; step <= n; step++) {
    const r = order[(((at + (forward ? step : -step)) % n) + n) % n];
    if (r._lossy) {
      S.collapsed.delete(r._conv.key);
      if (!passes(r)) {
        S.filterLossy = false;
        S.codeFilter = null;
        S.search = "";
        UI.search.value = "";
      }
      buildRows();
      select(r.index, { user: true });
      return;
    }
  }
}

function onSearch() {
  S.search = UI.search.value;
  const q = S.search.trim();
  const jump = /^#?(\d+)$/.exec(q);
  if (jump) {
    const target = Number(jump[1]) - 1;
    if (S.byIndex.has(target)) {
      const r = S.byIndex.get(target);
      S.collapsed.delete(r._conv.key);
      buildRows();
      select(target, { user: true });
      return;
    }
  }
  refilter();
}
