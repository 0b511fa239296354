// The Cache Explorer, part 3: the views (the top bar, the conversation chart, the request
// beside the one it was compared with, the overview, the glossary).

function figuresNote(data) {
  if (data.figures === "simulated") {
    return "simulated — the trace reports no cache usage, so the mock's prefix-cache simulator ran over it (prompt counts the trace reports are kept)";
  }
  if (data.figures === "mixed") {
    return "mixed — the provider's own usage figures where the trace has them; the hits of requests without a cache figure are simulated by the mock's prefix cache (each request says which)";
  }
  return "reported — hits and prompt tokens are the provider's own usage figures";
}

function granularityNote(granularity) {
  if (!granularity) return "";
  const origin = {
    usage: "from the trace's own hits",
    "model-table": "from the model table",
    given: "given with --granularity",
  }[granularity.origin] || granularity.origin;
  return `cache granularity ${fmtN(granularity.tokens)} tokens, ${origin} (${granularity.detail})`;
}

function renderTop() {
  const d = S.data;
  const t = d.totals || {};
  const kpi = (value, label, title) => h("div", { class: "kpi", title }, h("b", null, value), h("span", null, label));
  UI.top.replaceChildren(
    h("h1", { title: d.path || d.source }, `Cache Explorer · ${d.path || d.source}`),
    kpi(fmtPct(d.efficiency), "efficiency", "Σ min(hit, reusable) / Σ reusable"),
    kpi(fmtPct(d.hitRate), "hit rate", "Σ hit / Σ prompt"),
    kpi(fmtN(t.lostTokens), "tokens lost", "reusable − hit, summed"),
    kpi(fmtUsd(t.cost), "est. cost", "at list prices (see the overview)"),
    kpi(fmtUsd(t.lostCost), "cost of lost hits", "what the lost tokens cost beyond a hit"),
    h("span", { class: "badge", "data-figures": d.figures, title: figuresNote(d) }, `figures: ${d.figures}`),
    h("span", { class: "badge", title: granularityNote(d.granularity) }, `granularity ${fmtN(d.granularity && d.granularity.tokens)} · ${d.granularity && d.granularity.origin}`),
    h("span", { class: "spacer" }),
    UI.liveBadge,
  );
}

/** The chart of a conversation: per request its prompt (grey), hit (green) and lost (red)
 * tokens as stacked bars; requests summed into buckets above CHART_BARS. */
function chart(conv, height) {
  const reqs = conv.reqs;
  const per = Math.max(1, Math.ceil(reqs.length / CHART_BARS));
  const buckets = [];
  for (let i = 0; i < reqs.length; i += per) {
    const part = reqs.slice(i, i + per);
    let prompt = 0;
    let hit = 0;
    let lost = 0;
    for (const r of part) {
      const p = r.promptTokens || 0;
      const hh = Math.min(r.hitTokens || 0, p);
      prompt += p;
      hit += hh;
      lost += Math.min(r.lostTokens || 0, p - hh);
    }
    const pick = part.reduce((a, b) => ((b.lostTokens || 0) > (a.lostTokens || 0) ? b : a), part[0]);
    buckets.push({ part, prompt, hit, lost, pick });
  }
  const top = Math.max(1, ...buckets.map((b) => b.prompt));
  const n = buckets.length;
  const svg = hs("svg", {
    class: "chart",
    viewBox: `0 0 ${n} 100`,
    preserveAspectRatio: "none",
    role: "img",
    style: `height:${height}px`,
    "aria-label": `prompt, hit and lost tokens of the ${reqs.length} requests of conversation ${conv.key}`,
  });
  svg.append(hs("line", { class: "axis", x1: 0, x2: n, y1: 100, y2: 100, "vector-effect": "non-scaling-stroke" }));
  buckets.forEach((b, i) => {
    const scale = 100 / top;
    const hitH = b.hit * scale;
    const lostH = b.lost * scale;
    const restH = Math.max(0, b.prompt * scale - hitH - lostH);
    const label = b.part.length === 1 ? num(b.part[0].index) : `${num(b.part[0].index)}–${num(b.part[b.part.length - 1].index)}`;
    const g = hs(
      "g",
      { "data-index": b.pick.index },
      hs("title", null, `${label}: prompt ${fmtN(b.prompt)}, hit ${fmtN(b.hit)}, lost ${fmtN(b.lost)}`),
      hs("rect", { class: "hit", x: i + 0.1, width: 0.8, y: 100 - hitH, height: hitH }),
      hs("rect", { class: "lost", x: i + 0.1, width: 0.8, y: 100 - hitH - lostH, height: lostH }),
      hs("rect", { class: "rest", x: i + 0.1, width: 0.8, y: 100 - hitH - lostH - restH, height: restH }),
    );
    svg.append(g);
    if (b.part.some((r) => r.index === S.sel)) {
      svg.append(hs("rect", { class: "cursor", x: i, width: 1, y: 0, height: 100, opacity: 0.18 }));
    }
  });
  svg.addEventListener("click", (event) => {
    const box = svg.getBoundingClientRect();
    const i = Math.min(n - 1, Math.max(0, Math.floor(((event.clientX - box.left) / box.width) * n)));
    select(buckets[i].pick.index, { user: true });
  });
  const t = conv.c.totals || {};
  return h(
    "div",
    { class: "chart-box" },
    h(
      "div",
      { class: "caption" },
      h("b", null, `conversation ${conv.key}`),
      h("span", null, `${fmtN(reqs.length)} requests`),
      h("span", null, `efficiency ${fmtPct(conv.c.efficiency)}`),
      h("span", null, `hit rate ${fmtPct(conv.c.hitRate)}`),
      h("span", null, `lost ${fmtN(t.lostTokens)} tokens (${fmtUsd(t.lostCost)})`),
      per > 1 ? h("span", null, `${per} requests per bar`) : null,
      h("span", { class: "spacer" }),
      h("span", { class: "key" }, h("i", { class: "hit" }), "hit"),
      h("span", { class: "key" }, h("i", { class: "lost" }), "lost"),
      h("span", { class: "key" }, h("i", { class: "new" }), "rest of the prompt"),
    ),
    svg,
  );
}

function codeLink(code) {
  if (!S.cfg.codes[code]) return h("span", { class: "code" }, code);
  return h("a", { class: "code", href: `#code-${code}`, "data-code": code, title: S.cfg.codes[code].sentence }, code);
}

/** One side of a diff: the excerpt with its differing characters marked (whitespace shown). */
function diffSide(text, start, end, tag) {
  const changed = text.slice(start, end);
  const marked = h(tag, null);
  if (changed === "") {
    marked.append(h("span", { class: "caret", title: "nothing here on this side" }, "‸"));
  } else {
    for (const part of changed.split(/([ \t\n\r])/)) {
      if (part === "") continue;
      if (/^[ \t\n\r]$/.test(part)) {
        const shown = { " ": "·", "\t": "→", "\n": "↵\n", "\r": "␍" }[part];
        marked.append(h("span", { class: "ws", title: JSON.stringify(part) }, shown));
      } else {
        marked.append(part);
      }
    }
  }
  const pre = h("pre", null);
  const cut = contextStart(text, start);
  if (cut > 0) {
    pre.append(
      h(
        "span",
        {
          class: "more",
          title: "show the context before",
          onclick: (event) => event.currentTarget.replaceWith(text.slice(0, cut)),
        },
        "…",
      ),
    );
  }
  pre.append(text.slice(cut, start), marked, text.slice(end));
  return pre;
}

/** Where the shown context starts: the line two lines above the change (at most 160
 * characters before it). */
function contextStart(text, start) {
  let at = text.lastIndexOf("\n", start - 1);
  for (let k = 0; k < 2 && at > 0; k++) at = text.lastIndexOf("\n", at - 1);
  return Math.max(at < 0 ? 0 : at + 1, start - 160);
}

function diffView(r, f) {
  const d = f.diff;
  const parent = r.parent === null ? "the earlier request" : num(r.parent);
  const echo = ECHO_CODES.has(f.code);
  return h(
    "div",
    { class: "diff", "data-code": f.code },
    h(
      "div",
      { class: "side" },
      h("div", { class: "sl" }, echo ? `produced by the model (answer of ${parent})` : parent),
      diffSide(d.before, d.start, d.beforeEnd, "del"),
    ),
    h(
      "div",
      { class: "side" },
      h("div", { class: "sl" }, echo ? `sent back in ${num(r.index)}` : num(r.index)),
      diffSide(d.after, d.start, d.afterEnd, "ins"),
    ),
  );
}

function findingCard(r, f) {
  const info = S.cfg.codes[f.code];
  const group = groupOf(r, f);
  const others = group ? group.requests.filter((i) => i !== r.index) : [];
  return h(
    "div",
    { class: `card finding ${f.severity}`, "data-code": f.code },
    h(
      "div",
      { class: "fh" },
      codeLink(f.code),
      h("span", { class: `sev ${f.severity}` }, f.severity),
      f.where ? h("code", null, f.where) : null,
      f.lostTokens ? h("span", null, `${fmtN(f.lostTokens)} tokens lost`) : null,
      f.rejected ? h("span", { class: "badge" }, "the API refuses this") : null,
      f.rendered === false ? h("span", { class: "badge", title: "DeepSeek's template does not render this difference" }, "not in the prompt") : null,
    ),
    h("div", { class: "detail" }, f.detail),
    f.diff ? diffView(r, f) : null,
    f.evidence && f.evidence.length ? h("div", { class: "evidence mono" }, f.evidence.join("\n")) : null,
    info ? h("div", { class: "advice" }, h("b", null, "What to do: "), info.advice) : null,
    others.length
      ? h(
          "div",
          { class: "also" },
          `The same finding on ${group.requests.length} requests (${group.label}`,
          group.lostTokens ? `, ${fmtN(group.lostTokens)} tokens lost in all` : "",
          "): ",
          others.slice(0, 12).map((i, k) => [k ? ", " : "", requestLink(i)]),
          others.length > 12 ? ` and ${others.length - 12} more` : "",
        )
      : null,
    h("div", { class: "muted", style: "font-size:12px" }, "docs: ", h("code", null, `${S.cfg.docs}#${f.code}`)),
  );
}

function requestLink(i) {
  return h(
    "a",
    {
      href: `#r=${i + 1}`,
      "data-index": i,
      onclick: (event) => {
        event.preventDefault();
        select(i, { user: true, reveal: true });
      },
    },
    num(i),
  );
}

/** The prompt as a bar of its components, sized by tokens, coloured by zone. */
function promptBar(r, scale, colour, breakAt) {
  const segs = r.segments || [];
  const total = segs.reduce((a, s) => a + s.tokens, 0);
  const bar = h("div", {
    class: "bar",
    style: `width:${(Math.max(total, 1) / scale) * 100}%`,
    "data-index": r.index,
  });
  const zs = colour ? zones(r, total) : [];
  let at = 0;
  segs.forEach((s, k) => {
    const a = at;
    const b = at + s.tokens;
    at = b;
    const stops = [];
    for (const [kind, za, zb] of zs) {
      const lo = Math.max(a, za);
      const hi = Math.min(b, zb);
      if (hi <= lo) continue;
      const colourVar = `var(--${kind})`;
      stops.push(`${colourVar} ${((lo - a) / s.tokens) * 100}% ${((hi - a) / s.tokens) * 100}%`);
    }
    const style = [`flex:0 0 ${(s.tokens / Math.max(total, 1)) * 100}%`];
    if (stops.length) style.push(`background:linear-gradient(to right,${stops.join(",")})`);
    const classes = ["seg"];
    if (!stops.length) classes.push("plain");
    if (r.divergence && s.label === r.divergence && breakAt !== null) classes.push("div");
    if (S.pickedSegment && S.pickedSegment.index === r.index && S.pickedSegment.k === k) classes.push("picked");
    bar.append(
      h("div", {
        class: classes.join(" "),
        style: style.join(";"),
        title: `${s.label}: ${fmtN(s.tokens)} tokens`,
        "data-label": s.label,
        onclick: () => {
          S.pickedSegment = { index: r.index, k };
          renderMain();
        },
      }),
    );
  });
  if (breakAt !== null && total) {
    bar.append(h("div", { class: "brk", style: `left:${(Math.min(breakAt, total) / total) * 100}%`, title: `first difference at token ${fmtN(breakAt)}` }));
  }
  return bar;
}

function segmentInfo() {
  const p = S.pickedSegment;
  if (!p || !S.byIndex.has(p.index)) return "Click a segment for its size and how much of it was a hit.";
  const r = S.byIndex.get(p.index);
  const segs = r.segments || [];
  if (!segs[p.k]) return "";
  const total = segs.reduce((a, s) => a + s.tokens, 0);
  const a = segs.slice(0, p.k).reduce((x, s) => x + s.tokens, 0);
  const b = a + segs[p.k].tokens;
  const parts = zones(r, total)
    .map(([kind, za, zb]) => [kind, Math.max(0, Math.min(b, zb) - Math.max(a, za))])
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${fmtN(n)} ${kind}`);
  return `${num(r.index)} ${segs[p.k].label}: ${fmtN(segs[p.k].tokens)} tokens (positions ${fmtN(a)}–${fmtN(b)})${parts.length ? ` · ${parts.join(", ")}` : ""}`;
}

/** How a request relates to the one it is compared with, in words. */
function relationWords(r) {
  return { diverges: "diverges from", branch: "is a side call off", extends: "extends", repeats: "repeats" }[r.relation] || r.relation;
}

function unitTokens() {
  return (S.data && S.data.granularity && S.data.granularity.tokens) || null;
}

/** Why a request shares more with the one it is compared with than it hit, said as what it is:
 * hits come in whole cache units (the rest is rounding), or the provider missed (never a
 * contradiction between the figures). */
function beyondTheHit(r, parent) {
  const unit = unitTokens();
  const out = [];
  if ((r.roundedOffTokens || 0) > 0 && unit) {
    out.push(
      ` The last ${fmtN(r.roundedOffTokens)} tokens it shares with ${num(r.parent)} fall short of a whole ${fmtN(unit)}-token cache unit: hits come in whole units, so they are read again at the miss price (rounding to the unit, not a loss).`,
    );
  } else if (parent && unit && (parent.promptTokens || 0) > (r.hitTokens || 0) && (r.reusableTokens || 0) === (r.hitTokens || 0) && r.relation !== "branch") {
    const rest = parent.promptTokens - r.hitTokens;
    if (rest < unit + 8) {
      out.push(` ${num(r.parent)}'s last ${fmtN(rest)} prompt tokens are less than a whole ${fmtN(unit)}-token unit past the hit: hits come in whole units (rounding to the unit, not a loss).`);
    }
  }
  return out.join("");
}

function verdict(r) {
  const losses = (r.findings || []).filter((f) => f.severity === "loss");
  const parent = r.parent === null ? null : S.byIndex.get(r.parent) || null;
  if (r.status >= 400) {
    return ["refusal", `Refused by the API (status ${r.status})${r.error ? `: ${r.error}` : ""}. A refused request caches nothing.`];
  }
  if (r.parent === null) {
    return ["ok", `First request of conversation ${r._conv.key}: nothing earlier to reuse.`];
  }
  if (r.hitTokens === null || r.hitTokens === undefined) {
    const how = relationWords(r);
    return ["ok", `${how.charAt(0).toUpperCase()}${how.slice(1)} ${num(r.parent)}; no cache figures for this request (the trace reports none).`];
  }
  const side = r.relation === "branch" ? ` A side call: compared with ${num(r.parent)} on what they share, reported apart from the main line.` : "";
  if ((r.lostTokens || 0) > 0) {
    const where = r.divergence ? ` — first difference in ${r.divergence} at token ${fmtN(r.sharedTokens)}` : "";
    const why = losses.length ? ` — cause: ${losses.map((f) => f.code).join(", ")}` : "";
    const share = r.reusableTokens ? ` (${fmtPct(r.lostTokens / r.reusableTokens)})` : "";
    const missed =
      (r.hitTokens || 0) < (r.sharedTokens || 0)
        ? ` ${fmtN(r.sharedTokens - r.hitTokens)} of the ${fmtN(r.sharedTokens)} tokens it shares with ${num(r.parent)} were not hits: the provider's cache missed them (nothing in the request changed there).`
        : "";
    return ["loss", `Lost ${fmtN(r.lostTokens)} of ${fmtN(r.reusableTokens)} reusable tokens${share}${where}${why}.${missed}${side}`];
  }
  const how = `${relationWords(r)} ${num(r.parent)}`;
  return ["ok", `Lost nothing: ${how}${r.reusableTokens ? ` — all ${fmtN(r.reusableTokens)} reusable tokens were hits` : ""}.${beyondTheHit(r, parent)}${side}`];
}

function figures(r, parentOf) {
  const cell = (value, label) => h("div", null, h("b", null, value), h("span", null, label));
  const out = [
    cell(fmtN(r.promptTokens), "prompt tokens"),
    cell(`${fmtN(r.hitTokens)} (${fmtPct(r.hitRate)})`, "hit"),
    cell(fmtN(r.completionTokens), "completion"),
    cell(fmtUsd(r.cost), "est. cost"),
  ];
  if (parentOf) {
    out.push(
      cell(fmtN(r.reusableTokens), `reusable from ${num(r.parent)}`),
      cell(fmtN(r.sharedTokens), "shared prefix (whole units)"),
      cell(fmtN(r.lostTokens), "lost"),
      cell(fmtUsd(r.lostCost), "cost of the loss"),
    );
    if ((r.roundedOffTokens || 0) > 0) out.push(cell(fmtN(r.roundedOffTokens), "below one unit (rounded off)"));
  }
  return h("div", { class: "figs" }, out);
}

function requestView(r) {
  const parent = r.parent === null ? null : S.byIndex.get(r.parent) || null;
  const [kind, text] = verdict(r);
  const meta = [
    `conversation ${r._conv.key}`,
    `request ${r.position} of ${r._conv.reqs.length}`,
    r.model,
    r.status !== null && r.status !== undefined ? `status ${r.status}` : null,
    fmtTime(r.started),
  ].filter(Boolean);
  const card = (x, title, cls) => h("div", { class: `card ${cls}` }, h("h3", null, title), figures(x, x === r && r.parent !== null));
  const segsOf = (x) => (x.segments || []).reduce((a, s) => a + s.tokens, 0);
  const scale = Math.max(1, segsOf(r), parent ? segsOf(parent) : 0);
  const breakAt = r.parent !== null && r.divergence ? r.sharedTokens || 0 : null;
  const findings = [...(r.findings || [])].sort((a, b) => GRAVITY[b.severity] - GRAVITY[a.severity]);
  return h(
    "section",
    { class: "request", "data-index": r.index },
    h("div", { class: "head" }, h("h2", null, `Request ${num(r.index)}`), h("span", { class: "muted" }, meta.join(" · "))),
    h("div", { class: `verdict ${kind}`, "data-verdict": kind }, text),
    h(
      "div",
      { class: "ab" },
      parent
        ? card(parent, ["A · ", requestLink(parent.index), ` · the request ${num(r.index)} ${relationWords(r)}`], "a")
        : h("div", { class: "card a muted" }, r.parent === null ? "No earlier request: this one starts its conversation." : `Request ${num(r.parent)} is not in this report.`),
      card(r, `B · ${num(r.index)} · this request`, "b"),
    ),
    h(
      "div",
      { class: "sig" },
      h("h3", null, "Prompt signature"),
      parent ? [h("div", { class: "lbl" }, `A ${num(parent.index)}`), promptBar(parent, scale, false, breakAt)] : null,
      h("div", { class: "lbl" }, `B ${num(r.index)}`),
      promptBar(r, scale, true, breakAt),
      h(
        "div",
        { class: "seginfo" },
        h("span", { class: "key" }, h("i", { class: "hit" }), "hit"),
        h("span", { class: "key" }, h("i", { class: "shared-lost" }), "shared but not hit"),
        h("span", { class: "key" }, h("i", { class: "lost" }), "lost to a change"),
        h("span", { class: "key" }, h("i", { class: "new" }), "new"),
        breakAt !== null ? h("span", { class: "key" }, h("i", { class: "brk" }), "first difference") : null,
      ),
      h("div", { class: "seginfo", "data-role": "seginfo" }, segmentInfo()),
    ),
    findings.length ? h("h3", null, `Findings (${findings.length})`) : null,
    findings.map((f) => findingCard(r, f)),
    r.notes && r.notes.length ? [h("h3", null, "Notes"), h("ul", null, r.notes.map((n) => h("li", null, n)))] : null,
    r.logEvents && r.logEvents.length
      ? [h("h3", null, "What the recording says"), h("ul", null, r.logEvents.map((n) => h("li", null, n)))]
      : null,
  );
}

function requestPane() {
  const r = S.sel === null ? null : S.byIndex.get(S.sel);
  if (!r) {
    return h("div", { class: "empty" }, S.reqs.length ? "Pick a request in the rail." : "The trace is empty: it holds no model requests.");
  }
  return h("div", null, chart(r._conv, 96), requestView(r));
}
