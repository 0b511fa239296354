// The Cache Explorer, part 1: helpers, state, and the index built from the report's JSON.
// The page's scripts are concatenated into one function scope by _page.py (core, rail, views,
// app): plain ES2020, no modules, no dependencies. Nothing here writes markup from the data:
// every text goes through textContent (el.append of a string) or setAttribute.

const ROW = 30; // the rail's row height in px (the CSS variable --row says the same)
const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_BARS = 400; // above this many requests, the chart sums requests into buckets
const GRAVITY = { note: 0, loss: 1, refusal: 2 };
const ECHO_CODES = new Set(["tool-args-reserialized", "reasoning-altered", "reasoning-dropped"]);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  appendKids(el, kids);
  return el;
}

function hs(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  appendKids(el, kids);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.setAttribute("class", value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function appendKids(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
}

const fmtN = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const fmtPct = (x) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(1)} %`);
const num = (i) => `#${i + 1}`;

function fmtUsd(x) {
  if (x === null || x === undefined) return "–";
  if (x === 0) return "$0";
  if (Math.abs(x) < 1e-6) return `$${x.toExponential(2)}`;
  if (Math.abs(x) < 0.01) return `$${Number(x.toPrecision(3))}`;
  return `$${x.toFixed(2)}`;
}

function fmtTime(seconds) {
  if (seconds === null || seconds === undefined || !(seconds > 1e9)) return null;
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** "#2–#5, #9": trace indexes as 1-based request numbers, runs joined (as the report does). */
function ranges(indexes) {
  const numbers = [...new Set(indexes.map((i) => i + 1))].sort((a, b) => a - b);
  const runs = [];
  let start = null;
  let prev = null;
  for (const n of numbers) {
    if (start === null) {
      start = prev = n;
    } else if (n === prev + 1) {
      prev = n;
    } else {
      runs.push(start === prev ? `#${start}` : `#${start}–#${prev}`);
      start = prev = n;
    }
  }
  if (start !== null) runs.push(start === prev ? `#${start}` : `#${start}–#${prev}`);
  return runs.join(", ");
}

/** A 4-place rate as the report rounds it. */
function rate4(value) {
  return Math.round(value * 1e4) / 1e4;
}

function expandFinding(body, lost, codes) {
  let diff = body.diff === undefined ? null : body.diff;
  if (Array.isArray(diff)) {
    const [prefix, before, after, suffix] = diff;
    diff = {
      before: prefix + before + suffix,
      after: prefix + after + suffix,
      start: prefix.length,
      beforeEnd: prefix.length + before.length,
      afterEnd: prefix.length + after.length,
    };
  }
  return {
    code: body.code,
    severity: body.severity,
    sentence: codes[body.code] || "",
    detail: body.detail,
    where: body.where === undefined ? null : body.where,
    evidence: body.evidence || [],
    lostTokens: lost,
    rejected: body.rejected || false,
    rendered: body.rendered === undefined ? true : body.rendered,
    diff,
    signature: body.signature,
  };
}

/** The full report (formatVersion 3) a compact one (formatVersion 4) stands for, as
 * dsh_testkit.doctor.expand_report gives it; a full one as it is. */
function expandReport(doc) {
  if (!doc || doc.formatVersion === 3) return doc;
  if (doc.formatVersion !== 4) throw new Error(`report formatVersion ${doc.formatVersion} is not read by this page`);
  const codes = doc.codes || {};
  const sources = doc.figureSources || [];
  const opt = (v) => (v === undefined ? null : v);
  const conversations = (doc.conversations || []).map((c) => {
    const bodies = c.findings || [];
    const labels = c.labels || [];
    const byIndex = new Map();
    const requests = c.requests.map((r, i) => {
      byIndex.set(r.index, r);
      const hit = opt(r.hitTokens);
      const prompt = opt(r.promptTokens);
      const status = opt(r.status);
      const reusable = r.reusableTokens || 0;
      const measured = hit !== null && !((status || 0) >= 400);
      const src = sources[r.figures || 0] || [null, null, null];
      const flat = r.segments || [];
      const segments = [];
      for (let k = 0; k < flat.length; k += 2) segments.push({ label: labels[flat[k]], tokens: flat[k + 1] });
      return {
        index: r.index,
        position: i + 1,
        conversation: c.key,
        parent: opt(r.parent),
        relation: r.relation,
        model: opt(r.model),
        status,
        error: opt(r.error),
        outcome: opt(r.outcome),
        promptTokens: prompt,
        hitTokens: hit,
        completionTokens: opt(r.completionTokens),
        figures: { prompt: src[0], hit: src[1], origin: src[2] },
        hitRate: hit === null || !prompt ? null : rate4(hit / prompt),
        reusableTokens: reusable,
        sharedTokens: r.sharedTokens || 0,
        roundedOffTokens: r.roundedOffTokens || 0,
        lostTokens: measured ? reusable - Math.min(hit || 0, reusable) : 0,
        divergence: opt(r.divergence),
        findings: (r.findings || []).map(([id, lost]) => expandFinding(bodies[id], lost, codes)),
        logEvents: r.logEvents || [],
        notes: r.notes || [],
        segments,
        started: opt(r.started),
        cost: opt(r.cost),
        lostCost: opt(r.lostCost),
      };
    });
    const findingGroups = (c.groups || []).map(([id, members, lost]) => {
      const first = (byIndex.get(members[0]).findings || []).find(([fid]) => fid === id);
      const finding = expandFinding(bodies[id], first ? first[1] : 0, codes);
      return { code: finding.code, severity: finding.severity, requests: members, label: ranges(members), lostTokens: lost, finding };
    });
    return {
      key: c.key,
      totals: c.totals,
      sideCalls: c.sideCalls,
      efficiency: c.totals.efficiency,
      hitRate: c.totals.hitRate,
      findingGroups,
      requests,
    };
  });
  const out = { ...doc, formatVersion: 3, efficiency: doc.totals.efficiency, hitRate: doc.totals.hitRate, conversations };
  delete out.codes;
  delete out.figureSources;
  return out;
}

function readJson(id) {
  const node = document.getElementById(id);
  return JSON.parse(node ? node.textContent : "null");
}

/** The page's whole state; the index fields are rebuilt from `data` on every update. */
const S = {
  data: null,
  cfg: null,
  reqs: [], // every request, by trace index
  byIndex: new Map(),
  convs: [], // {key, c (its JSON), reqs, groups: Map key → group, lossy}
  rows: [], // the rail's rows after filter and collapse: {kind: "conv"|"req", conv|r}
  sel: null, // the selected request's trace index
  userPicked: false, // false: the selection follows the newest request (a live page)
  filterLossy: false,
  codeFilter: null,
  search: "",
  collapsed: new Set(),
  tab: "request",
  version: null,
  pickedSegment: null,
  shownConvs: 100,
  seen: 0, // requests in the previous data (for the "new requests" notice)
};

function findingKey(f) {
  return `${f.code}\u0000${f.signature ?? f.detail}`;
}

function gravest(findings) {
  let best = null;
  for (const f of findings) if (best === null || GRAVITY[f.severity] > GRAVITY[best]) best = f.severity;
  return best;
}

/** Which child of each parent continues its line: the one with the larger subtree, then
 * one that extends (a side call diverges more often), then the later one. */
function branchDepths(reqs) {
  const inConv = new Map(reqs.map((r) => [r.index, r]));
  const size = new Map();
  for (let i = reqs.length - 1; i >= 0; i--) {
    const r = reqs[i];
    size.set(r.index, (size.get(r.index) || 0) + 1);
    if (r.parent !== null && inConv.has(r.parent)) {
      size.set(r.parent, (size.get(r.parent) || 0) + size.get(r.index));
    }
  }
  const main = new Map();
  for (const r of reqs) {
    if (r.parent === null || !inConv.has(r.parent)) continue;
    const best = main.get(r.parent);
    const score = [size.get(r.index), r.relation === "diverges" ? 0 : 1, r.index];
    if (!best || compareScores(score, best.score) > 0) main.set(r.parent, { r, score });
  }
  for (const r of reqs) {
    const parent = r.parent === null ? null : inConv.get(r.parent);
    if (!parent) {
      r._depth = 0;
      r._branch = false;
      continue;
    }
    const isMain = main.get(r.parent).r === r;
    r._depth = parent._depth + (isMain ? 0 : 1);
    r._branch = !isMain;
  }
}

function compareScores(a, b) {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

function index(data) {
  data = expandReport(data);
  S.data = data;
  S.reqs = [];
  S.byIndex = new Map();
  S.convs = [];
  for (const c of data.conversations || []) {
    const groups = new Map();
    for (const g of c.findingGroups || []) groups.set(findingKey(g.finding), g);
    const conv = { key: c.key, c, reqs: c.requests || [], groups, lossy: 0 };
    for (const r of conv.reqs) {
      r._conv = conv;
      const codes = new Map();
      for (const f of r.findings || []) {
        const was = codes.get(f.code);
        if (!was || GRAVITY[f.severity] > GRAVITY[was]) codes.set(f.code, f.severity);
      }
      r._codes = codes;
      const worst = gravest(r.findings || []);
      r._lossy = (r.lostTokens || 0) > 0 || worst === "loss" || worst === "refusal";
      if (r._lossy) conv.lossy += 1;
      S.reqs.push(r);
      S.byIndex.set(r.index, r);
    }
    branchDepths(conv.reqs);
    S.convs.push(conv);
  }
  S.reqs.sort((a, b) => a.index - b.index);
}

/** The group a request's finding belongs to (the same change said once for its requests). */
function groupOf(r, f) {
  const conv = r._conv;
  const found = conv.groups.get(findingKey(f));
  if (found && found.requests.includes(r.index)) return found;
  const candidates = (conv.c.findingGroups || []).filter(
    (g) => g.code === f.code && g.requests.includes(r.index),
  );
  return candidates.length === 1 ? candidates[0] : null;
}

function passes(r) {
  if (S.filterLossy && !r._lossy) return false;
  if (S.codeFilter && !r._codes.has(S.codeFilter)) return false;
  const q = S.search.trim().toLowerCase();
  if (q && !/^#?\d+$/.test(q)) {
    const hay = [
      ...r._codes.keys(),
      r.model || "",
      r.divergence || "",
      r._conv.key,
      r.relation,
      r.error || "",
    ]
      .join(" ")
      .toLowerCase();
    if (!hay.includes(q)) return false;
  }
  return true;
}

function filtering() {
  const q = S.search.trim();
  return S.filterLossy || S.codeFilter !== null || (q !== "" && !/^#?\d+$/.test(q));
}

function buildRows() {
  const rows = [];
  const active = filtering();
  for (const conv of S.convs) {
    const shown = active ? conv.reqs.filter(passes) : conv.reqs;
    if (active && shown.length === 0) continue;
    rows.push({ kind: "conv", conv, shown: shown.length });
    if (!S.collapsed.has(conv.key)) for (const r of shown) rows.push({ kind: "req", r });
  }
  S.rows = rows;
}

function rowOf(indexValue) {
  return S.rows.findIndex((row) => row.kind === "req" && row.r.index === indexValue);
}

/** A request's prompt zones in provider tokens: hit, shared-but-lost, lost to a change, new. */
function zones(r, total) {
  if (r.hitTokens === null || r.hitTokens === undefined) return [];
  const hit = Math.min(r.hitTokens, total);
  const shared = Math.min(r.sharedTokens || 0, total);
  const reusable = Math.min(r.reusableTokens || 0, total);
  const out = [["hit", 0, hit]];
  if (r.parent !== null && hit < shared) out.push(["shared-lost", hit, shared]);
  const lostFrom = Math.max(hit, shared);
  if (r.parent !== null && lostFrom < reusable) out.push(["lost", lostFrom, reusable]);
  out.push(["new", Math.max(hit, reusable), total]);
  return out.filter(([, a, b]) => b > a);
}
