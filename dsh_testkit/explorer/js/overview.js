// The Cache Explorer, part 4: the overview (totals, cost, what fixing each cause would save,
// the conversations, each finding said once) and the glossary (every cause code and term).

function costRows(d) {
  const t = d.totals || {};
  const prices = d.priceList || (d.prices ? [d.prices] : []);
  const rows = [
    ["Estimated cost of the trace", fmtUsd(t.cost)],
    ["What the lost hits cost (beyond a hit)", fmtUsd(t.lostCost)],
  ];
  if (t.cost !== null && t.cost !== undefined && t.lostCost !== null && t.lostCost !== undefined) {
    rows.push(["With every reusable token a hit", fmtUsd(t.cost - t.lostCost)]);
  }
  if (prices.length === 1 && t.cost !== null && t.cost !== undefined) {
    const p = prices[0];
    rows.push(["With no cache at all", fmtUsd(t.cost + ((t.hitTokens || 0) * (p.miss - p.hit)) / 1e6)]);
  }
  return { rows, prices };
}

function causesTable(d) {
  const counts = d.causeCounts || {};
  const savings = d.savings || {};
  const codes = Object.keys(counts).sort((a, b) => ((savings[b] || {}).lostTokens || 0) - ((savings[a] || {}).lostTokens || 0));
  if (!codes.length) return h("p", { class: "muted" }, "No cause found on any request.");
  const lostAll = (d.totals && d.totals.lostTokens) || 0;
  return h(
    "table",
    { class: "t causes" },
    h("tr", null, h("th", null, "cause"), h("th", null, "requests"), h("th", null, "tokens lost"), h("th", null, "share of the loss"), h("th", null, "fixing it would save")),
    codes.map((code) => {
      const s = savings[code] || {};
      return h(
        "tr",
        { class: "click", "data-code": code, title: "show these requests in the rail", onclick: () => setCodeFilter(code) },
        h("td", null, codeLink(code)),
        h("td", null, fmtN(counts[code])),
        h("td", null, fmtN(s.lostTokens || 0)),
        h("td", null, lostAll ? fmtPct((s.lostTokens || 0) / lostAll) : "–"),
        h("td", null, s.savings !== undefined ? fmtUsd(s.savings) : "–"),
      );
    }),
  );
}

function conversationsTable() {
  const convs = [...S.convs].sort((a, b) => ((b.c.totals || {}).lostTokens || 0) - ((a.c.totals || {}).lostTokens || 0));
  const shown = convs.slice(0, S.shownConvs);
  return [
    h(
      "table",
      { class: "t convs" },
      h("tr", null, h("th", null, "conversation"), h("th", null, "requests"), h("th", null, "efficiency"), h("th", null, "hit rate"), h("th", null, "tokens lost"), h("th", null, "est. cost"), h("th", { class: "l" }, "causes")),
      shown.map((conv) => {
        const t = conv.c.totals || {};
        const codes = [...new Set((conv.c.findingGroups || []).map((g) => g.code))];
        return h(
          "tr",
          {
            class: "click",
            "data-conv": conv.key,
            onclick: () => {
              const first = conv.reqs.find((r) => r._lossy) || conv.reqs[0];
              if (first) select(first.index, { user: true, reveal: true });
              setTab("request");
            },
          },
          h("td", null, conv.key),
          h("td", null, fmtN(conv.reqs.length)),
          h("td", null, fmtPct(conv.c.efficiency)),
          h("td", null, fmtPct(conv.c.hitRate)),
          h("td", null, fmtN(t.lostTokens)),
          h("td", null, fmtUsd(t.cost)),
          h("td", { class: "wrap" }, codes.join(", ")),
        );
      }),
    ),
    convs.length > shown.length
      ? h("button", { type: "button", onclick: () => { S.shownConvs += 200; renderMain(); } }, `show more (${fmtN(convs.length - shown.length)} not shown)`)
      : null,
  ];
}

function groupsOf(conv) {
  const groups = conv.c.findingGroups || [];
  if (!groups.length) return h("p", { class: "muted" }, "No finding in this conversation: every request extends the one it is compared with.");
  return groups.map((g) =>
    h(
      "div",
      { class: `card finding group ${g.severity}`, "data-code": g.code },
      h(
        "div",
        { class: "fh" },
        codeLink(g.code),
        h("span", { class: `sev ${g.severity}` }, g.severity),
        h("span", null, `on ${g.requests.length} request(s): `, g.requests.slice(0, 20).map((i, k) => [k ? ", " : "", requestLink(i)]), g.requests.length > 20 ? ` … (${g.label})` : ""),
        g.lostTokens ? h("span", null, `${fmtN(g.lostTokens)} tokens lost`) : null,
      ),
      h("div", { class: "detail" }, g.finding.detail),
      g.finding.evidence && g.finding.evidence.length ? h("div", { class: "evidence mono" }, g.finding.evidence.join("\n")) : null,
    ),
  );
}

function overviewPane() {
  const d = S.data;
  const t = d.totals || {};
  const { rows, prices } = costRows(d);
  const conv = (S.sel !== null && S.byIndex.has(S.sel) ? S.byIndex.get(S.sel)._conv : null) || S.convs[0];
  return h(
    "div",
    { class: "overview" },
    h("h2", null, "The trace"),
    h(
      "div",
      { class: "card" },
      h("div", null, h("b", null, "Source: "), d.source, d.path ? ` · ${d.path}` : ""),
      h("div", { "data-role": "figures" }, h("b", null, "Figures: "), figuresNote(d), "."),
      h("div", { "data-role": "granularity" }, h("b", null, "Granularity: "), `${granularityNote(d.granularity)}.`),
      d.timeResolution ? h("div", null, h("b", null, "Times: "), `known to ${d.timeResolution} s`) : null,
      (d.notes || []).map((n) => h("div", { class: "muted" }, `note: ${n}`)),
    ),
    h(
      "table",
      { class: "t totals" },
      h("tr", null, ["requests", "measured", "refused", "prompt", "hit", "reusable", "lost", "efficiency", "hit rate"].map((x) => h("th", null, x))),
      h(
        "tr",
        null,
        [t.requests, t.measured, t.refused, t.promptTokens, t.hitTokens, t.reusableTokens, t.lostTokens].map((x) => h("td", null, fmtN(x))),
        h("td", null, fmtPct(d.efficiency)),
        h("td", null, fmtPct(d.hitRate)),
      ),
    ),
    h("h2", null, "Cost"),
    h("table", { class: "t cost" }, rows.map(([k, v]) => h("tr", null, h("td", null, k), h("td", null, v)))),
    h(
      "p",
      { class: "muted", "data-role": "prices" },
      prices.length
        ? `List prices in US dollars per million tokens: ${prices.map((p) => `${p.label}: hit ${p.hit}, miss ${p.miss}, output ${p.output}`).join("; ")}. `
        : "",
      d.prices ? "Given with --price." : "From the model table, by each request's model and date; override with --price hit=…,miss=…,output=….",
    ),
    h("h2", null, "Causes, and what fixing each would save"),
    causesTable(d),
    h("h2", null, `Conversations (${fmtN(S.convs.length)})`),
    conversationsTable(),
    conv ? [h("h2", null, `Conversation ${conv.key}: each finding once`), chart(conv, 140), groupsOf(conv)] : null,
  );
}

function glossaryPane() {
  const counts = (S.data && S.data.causeCounts) || {};
  return h(
    "div",
    { class: "glossary" },
    h("h2", null, "Cause codes"),
    h(
      "dl",
      { class: "gl" },
      Object.entries(S.cfg.codes).map(([code, info]) => [
        h("dt", { id: `code-${code}` }, h("span", { class: "code" }, code), " ", h("span", { class: "sev" }, info.kind)),
        h(
          "dd",
          null,
          h("div", null, info.sentence),
          h("div", { class: "advice" }, h("b", null, "What to do: "), info.advice),
          h(
            "div",
            { class: "muted" },
            counts[code] ? [`found on ${fmtN(counts[code])} request(s) here — `, h("a", { href: "#", onclick: (e) => { e.preventDefault(); setCodeFilter(code); setTab("request"); } }, "show them")] : "not found in this trace",
            " · docs: ",
            h("code", null, `${S.cfg.docs}#${code}`),
          ),
        ),
      ]),
    ),
    h("h2", null, "Terms"),
    h("dl", { class: "gl" }, S.cfg.terms.map(([term, meaning]) => [h("dt", null, term), h("dd", null, meaning)])),
    h("h2", null, "Keys"),
    h(
      "dl",
      { class: "gl keys" },
      [
        ["↓ / j, ↑ / k", "next / previous request in the rail"],
        ["PgDn / PgUp, Home / End", "a page down / up, the first / last request"],
        ["n / p", "next / previous request that lost something"],
        ["a", "the request this one was compared with"],
        ["f", "show only requests that lost something"],
        ["/", "search (a request number jumps to it; a code or model filters)"],
        ["1 / 2 / 3", "request / overview / glossary"],
      ].map(([k, v]) => [h("dt", null, h("kbd", null, k)), h("dd", null, v)]),
    ),
  );
}
