// Differential test of gnomon's cron Next/Prev (ctest: cron_diff; docs/semantics.md "Search").
//
// Seeded random expressions in gnomon's syntax that croner also reads, in DST-heavy zones, with
// start instants near DST transitions, are answered by gnomon (the test driver
// gnomon_cron_diff_driver, one process for every query) and by croner (configured to gnomon's
// rules: Vixie OR of day-of-month and day-of-week, `a/n` steps). Where the two disagree, a
// brute-force judge written here decides: a slow day-by-day walk that checks every real instant
// (minute by minute, via the JavaScript Intl time zone data, not gnomon's) against a literal
// reading of docs/semantics.md. gnomon wrong: the test fails. croner wrong: allowed only when the
// case matches an entry of KNOWN_DIFFERENCES (a documented semantic difference), else the test
// fails too, so that a new kind of disagreement is looked at.
//
// Usage: node cron_diff.mjs DRIVER [--seed N] [--cases N]
import { spawnSync } from "node:child_process";
import { Cron } from "croner";

const args = process.argv.slice(2);
const DRIVER = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const SEED = opt("--seed", 20271107);
const CASES = opt("--cases", 3000);
const RUNS = 5; // fires per query, each searched from the previous one
const ZONES = [
  "America/New_York", // 1 h DST at 02:00
  "Europe/Berlin", // 1 h DST at 02:00/03:00
  "Australia/Lord_Howe", // 30 min DST
  "America/Santiago", // DST at midnight (24:00 -> 01:00, 24:00 -> 23:00)
  "Asia/Tehran", // DST at midnight until 2022
  "Pacific/Chatham", // +12:45/+13:45, DST at 02:45
];
const YEARS = [2015, 2035];
const HORIZON_S = 100 * 365 * 86400; // gnomon answers "never" after 100 years (docs/semantics.md)

if (!DRIVER) {
  console.error("usage: node cron_diff.mjs DRIVER [--seed N] [--cases N]");
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Seeded randomness (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(SEED);
const uni = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[uni(0, xs.length - 1)];

// ---------------------------------------------------------------------------------------------
// Civil time of an instant in a zone, from Intl (ICU's tz data: independent of gnomon's cctz).
const formatters = new Map();
function civilOf(zone, unixS) {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
      hour: "numeric", minute: "numeric", second: "numeric",
    });
    formatters.set(zone, f);
  }
  const m = /^(\d+)\/(\d+)\/(\d+), (\d+):(\d+):(\d+)$/.exec(f.format(new Date(unixS * 1000)));
  return { y: +m[3], mo: +m[1], d: +m[2], h: +m[4] % 24, mi: +m[5], s: +m[6] };
}
// Whether the wall time at x (whole minutes of overlap: every zone here) happened before, within
// three hours: x is in the second pass of a fall-back overlap.
const secondOccurrence = (zone, x) => {
  for (let back = 60; back <= 3 * 3600; back += 60) {
    if (offsetOf(zone, x - back) - offsetOf(zone, x) === back) return true;
  }
  return false;
};
// x is in a fall-back overlap (either pass): its wall time happens twice.
const inOverlap = (zone, x) => {
  if (secondOccurrence(zone, x)) return true;
  for (let ahead = 60; ahead <= 3 * 3600; ahead += 60) {
    if (offsetOf(zone, x) - offsetOf(zone, x + ahead) === ahead) return true;
  }
  return false;
};
// Civil time as seconds since 1970-01-01 00:00 (civil arithmetic, no zone).
const civilSeconds = (c) => Date.UTC(c.y, c.mo - 1, c.d, c.h, c.mi, c.s) / 1000;
const fromCivilSeconds = (x) => {
  const t = new Date(x * 1000);
  return { y: t.getUTCFullYear(), mo: t.getUTCMonth() + 1, d: t.getUTCDate(), h: t.getUTCHours(),
    mi: t.getUTCMinutes(), s: t.getUTCSeconds() };
};
const offsetOf = (zone, unixS) => civilSeconds(civilOf(zone, unixS)) - unixS;
const daysInMonth = (y, mo) => new Date(Date.UTC(y, mo, 0)).getUTCDate();
const weekday = (y, mo, d) => new Date(Date.UTC(y, mo - 1, d)).getUTCDay();
const iso = (s) => (s === null ? "none" : new Date(s * 1000).toISOString().replace(".000Z", "Z"));

// The zone's transitions in YEARS (daily samples, then bisection to the second).
function transitions(zone) {
  const out = [];
  const start = Date.UTC(YEARS[0], 0, 1) / 1000, end = Date.UTC(YEARS[1] + 1, 0, 1) / 1000;
  let prev = offsetOf(zone, start);
  for (let t = start + 86400; t <= end; t += 86400) {
    const off = offsetOf(zone, t);
    if (off === prev) continue;
    let lo = t - 86400, hi = t; // offset(lo) = prev, offset(hi) = off
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (offsetOf(zone, mid) === prev) lo = mid; else hi = mid;
    }
    out.push({ at: hi, before: prev, after: off });
    prev = off;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random expressions over the syntax both read (docs/semantics.md "Fields"; no H, no @every).
function field(lo, hi) {
  switch (uni(0, 9)) {
    case 0: case 1: return "*";
    case 2: case 3: return String(uni(lo, hi));
    case 4: { const a = uni(lo, hi); return `${a}-${uni(a, hi)}`; }
    case 5: return `*/${uni(1, Math.floor((hi - lo) / 2) + 1)}`;
    case 6: { const a = uni(lo, hi); return `${a}-${uni(a, hi)}/${uni(1, 7)}`; }
    case 7: return `${uni(lo, hi)}/${uni(1, Math.min(20, hi - lo + 1))}`;
    default: return `${uni(lo, hi)},${uni(lo, hi)},${uni(lo, hi)}`;
  }
}
function domField() {
  switch (uni(0, 14)) {
    case 0: return "L";
    case 1: return "LW";
    case 2: return `${uni(1, 31)}W`;
    case 3: return "?";
    case 4: return "*/1";
    default: return field(1, 31);
  }
}
function dowField() {
  switch (uni(0, 14)) {
    case 0: return `${uni(0, 7)}#${uni(1, 5)}`;
    case 1: return `${uni(0, 7)}L`;
    case 2: return `${uni(0, 7)}#L`;
    case 3: return "?";
    case 4: return pick(["MON-FRI", "SAT,SUN", "SUN", "TUE-THU"]);
    case 5: { const a = uni(0, 5); return `${a}-${uni(a, 6)}L`; }
    default: return field(0, 6);
  }
}
function monthField() {
  return uni(0, 9) === 0 ? pick(["JAN-JUN", "MAR,OCT", "NOV", "APR/2"]) : field(1, 12);
}
// An expression; `hour` (when given) replaces the hour field, so that fires land where the zone's
// offset changes (most random hours never would).
function expression(hour) {
  const shape = uni(0, 9);
  const f = [];
  if (shape >= 6) f.push(uni(0, 2) ? String(uni(0, 59)) : field(0, 59)); // 6 or 7 fields
  f.push(field(0, 59), hour === undefined ? field(0, 23) : hour, domField(), monthField(),
    dowField());
  if (shape === 9) {
    const a = uni(2018, 2034);
    f.push(uni(0, 1) ? String(a) : `${a}-${a + uni(1, 4)}`);
  }
  return f.join(" ");
}

// ---------------------------------------------------------------------------------------------
// The judge: docs/semantics.md read literally.
const DOW_NAMES = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
const MON_NAMES = { JAN: 1, FEB: 2, MAR: 3, APR: 4, MAY: 5, JUN: 6, JUL: 7, AUG: 8, SEP: 9,
  OCT: 10, NOV: 11, DEC: 12 };

// Values of one list item of a plain field: `*`, `?`, `a`, `a-b`, `*/n`, `a-b/n`, `a/n`.
function items(text, lo, hi, names = {}) {
  const out = new Set();
  const num = (s, isEnd) => {
    const u = s.toUpperCase();
    if (u in names) return isEnd && u === "SUN" ? 7 : names[u]; // `SAT-SUN` ends at 7
    return Number(s);
  };
  for (const item of text.split(",")) {
    const [range, stepText] = item.split("/");
    const step = stepText === undefined ? 1 : Number(stepText);
    let a, b;
    if (range === "*" || range === "?") [a, b] = [lo, hi];
    else if (range.includes("-")) { const [x, y] = range.split("-"); [a, b] = [num(x), num(y, true)]; }
    else { a = num(range); b = stepText === undefined ? a : hi; }
    for (let v = a; v <= b; v += step) out.add(v);
  }
  return out;
}

function parseForJudge(text) {
  let f = text.trim().split(/\s+/);
  if (f.length === 5) f = ["0", ...f];
  const [sec, min, hour, dom, mon, dow, year] = f;
  const e = {
    seconds: items(sec, 0, 59), minutes: items(min, 0, 59), hours: items(hour, 0, 23),
    months: items(mon, 1, 12, MON_NAMES), years: year === undefined ? null : items(year, 1970, 2299),
    domRestricted: !["*", "?", "*/1"].includes(dom), dowRestricted: !["*", "?", "*/1"].includes(dow),
    dom: new Set(), lastDay: false, lastWeekday: false, nearest: new Set(),
    dow: new Set(), nth: [], lastOf: new Set(),
  };
  // Fixed-time: second, minute and hour each hold exactly one value.
  e.fixed = e.seconds.size === 1 && e.minutes.size === 1 && e.hours.size === 1;
  for (const item of dom.split(",")) {
    if (item === "L") e.lastDay = true;
    else if (item === "LW") e.lastWeekday = true;
    else if (/^\d+W$/.test(item)) e.nearest.add(Number(item.slice(0, -1)));
    else for (const v of items(item, 1, 31)) e.dom.add(v);
  }
  for (const item of dow.split(",")) {
    const wd = (s) => (s.toUpperCase() in DOW_NAMES ? DOW_NAMES[s.toUpperCase()] : Number(s)) % 7;
    let m;
    if ((m = /^(\w+)#(\d)$/.exec(item))) e.nth.push([wd(m[1]), Number(m[2])]);
    else if ((m = /^(\w+)#L$/i.exec(item)) || (m = /^(\d)L$/.exec(item))) e.lastOf.add(wd(m[1]));
    else if ((m = /^(\d)-(\d)L$/.exec(item))) {
      for (let v = Number(m[1]); v <= Number(m[2]); ++v) e.lastOf.add(v % 7);
    } else for (const v of items(item, 0, 6, DOW_NAMES)) e.dow.add(v % 7); // `*`, `a/n` over 0-6
  }
  return e;
}

function dayMatches(e, y, mo, d) {
  if (e.years && !e.years.has(y)) return false;
  if (!e.months.has(mo)) return false;
  const dim = daysInMonth(y, mo);
  const isWorkday = (x) => weekday(y, mo, x) >= 1 && weekday(y, mo, x) <= 5;
  let domOk = e.dom.has(d) || (e.lastDay && d === dim);
  if (e.lastWeekday) {
    let x = dim;
    while (!isWorkday(x)) --x;
    domOk ||= x === d;
  }
  for (const n of e.nearest) {
    if (n > dim) continue; // no fire in months shorter than n
    const w = weekday(y, mo, n);
    let x = n;
    if (w === 6) x = n === 1 ? 3 : n - 1; // Saturday: Friday before, or Monday the 3rd
    if (w === 0) x = n === dim ? n - 2 : n + 1; // Sunday: Monday after, or Friday before
    domOk ||= x === d;
  }
  const w = weekday(y, mo, d);
  const nth = Math.floor((d - 1) / 7) + 1;
  const dowOk = e.dow.has(w) || e.nth.some(([a, n]) => a === w && n === nth) ||
    (e.lastOf.has(w) && d + 7 > dim);
  if (e.domRestricted && e.dowRestricted) return domOk || dowOk; // Vixie OR
  if (e.domRestricted) return domOk;
  if (e.dowRestricted) return dowOk;
  return true;
}
const civilMatches = (e, c) => e.seconds.has(c.s) && e.minutes.has(c.mi) && e.hours.has(c.h) &&
  dayMatches(e, c.y, c.mo, c.d);

// The smallest and largest UTC offsets of the zone in the years tested (and around them).
const offsetRanges = new Map();
function offsetRange(zone) {
  if (!offsetRanges.has(zone)) {
    const offs = zoneTransitions.get(zone).flatMap((t) => [t.before, t.after]);
    offs.push(offsetOf(zone, Date.UTC(YEARS[0], 0, 1) / 1000));
    offsetRanges.set(zone, { min: Math.min(...offs) - 3600, max: Math.max(...offs) + 3600 });
  }
  return offsetRanges.get(zone);
}

// Every fire whose wall time is on civil day (y, mo, d): every real instant of the window around
// the day, minute by minute (offsets change only at whole minutes in these zones and years).
function firesOnDay(e, zone, y, mo, d) {
  const out = [];
  const day0 = Date.UTC(y, mo - 1, d) / 1000;
  const sameDay = (c) => c.y === y && c.mo === mo && c.d === d;
  // The instants whose wall time can be on that day, given the zone's offsets (plus a minute).
  const { min, max } = offsetRange(zone);
  const first = day0 - max - 60, end = day0 + 86400 - min + 60;
  let prevCivil = civilSeconds(civilOf(zone, first - 60));
  for (let m = first; m < end; m += 60) {
    const c = civilOf(zone, m);
    const cs = civilSeconds(c);
    const gap = cs - prevCivil - 60; // > 0: wall times [prevCivil + 60, cs) never happen
    prevCivil = cs;
    if (gap > 0 && e.fixed) {
      // Fixed time swallowed by a gap: fires once, at the first instant after it.
      const [s] = e.seconds, [mi] = e.minutes, [h] = e.hours;
      for (const day of [cs - gap - 86400, cs - gap, cs]) {
        const w = fromCivilSeconds(Math.floor(day / 86400) * 86400 + h * 3600 + mi * 60 + s);
        const ws = civilSeconds(w);
        if (ws >= cs - gap && ws < cs && sameDay(w) && civilMatches(e, w)) out.push(m);
      }
    }
    if (!sameDay(c) || !e.hours.has(c.h) || !e.minutes.has(c.mi)) continue;
    for (const s of e.seconds) {
      const cw = { ...c, s };
      if (!civilMatches(e, cw)) continue;
      // Fall-back overlap: only the first occurrence of the wall time fires.
      if (e.fixed && secondOccurrence(zone, m)) continue;
      out.push(m + s);
    }
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

// The first fire strictly after `from` (dir = "next") or the last strictly before (dir = "prev").
function judge(e, zone, from, dir) {
  const c = civilOf(zone, from);
  const step = dir === "next" ? 1 : -1;
  let day = Date.UTC(c.y, c.mo - 1, c.d) / 1000 - step * 86400;
  let best = null;
  for (let i = 0; i < 100 * 366 + 2; ++i, day += step * 86400) {
    const dc = fromCivilSeconds(day);
    if (best !== null && Math.abs(day - (best + offsetOf(zone, best))) > 2 * 86400) break;
    if (!dayMatches(e, dc.y, dc.mo, dc.d)) continue;
    for (const x of firesOnDay(e, zone, dc.y, dc.mo, dc.d)) {
      if (dir === "next" ? x > from : x < from) {
        if (best === null || (dir === "next" ? x < best : x > best)) best = x;
      }
    }
  }
  if (best !== null && Math.abs(best - from) > HORIZON_S) best = null;
  return best;
}

// ---------------------------------------------------------------------------------------------
// Known differences: croner's answer is wrong by gnomon's rules, for a documented reason.
// Each predicate gets the disagreement: expression (judge's reading), zone, direction, start
// (the last instant both agreed on), the judge's answer (= gnomon's) and croner's.
// x is in a spring-forward gap's shadow: the first `gap` seconds after a transition at which the
// wall clock jumped forward by `gap` (so civil(x) - gap is a wall time that never happened).
function afterGap(zone, x) {
  const lo = x - 4 * 3600;
  if (offsetOf(zone, x) - offsetOf(zone, lo) <= 0) return null;
  let a = lo, b = x; // bisect the last change of offset in (lo, x]
  while (b - a > 1) {
    const mid = Math.floor((a + b) / 2);
    if (offsetOf(zone, mid) === offsetOf(zone, x)) b = mid; else a = mid;
  }
  const gap = offsetOf(zone, b) - offsetOf(zone, b - 1);
  return gap > 0 && x < b + gap ? gap : null;
}
const KNOWN_DIFFERENCES = [
  {
    id: "interval-second-pass",
    reason: "docs/semantics.md DST: an interval schedule fires at every real instant that " +
      "matches, both passes of a fall-back overlap; croner fires every schedule once, at the " +
      "first occurrence",
    applies: (k) => !k.e.fixed && k.truth !== null && inOverlap(k.zone, k.truth),
  },
  {
    id: "start-in-overlap",
    reason: "docs/semantics.md Search: Next/Prev are strictly after/before an instant; croner " +
      "searches wall time from the start's wall time, so from inside a fall-back overlap it " +
      "misses (or repeats) the other pass's wall times",
    applies: (k) => inOverlap(k.zone, k.start),
  },
  {
    id: "gap-shift",
    reason: "docs/semantics.md DST: in a spring-forward gap a fixed-time schedule fires once at " +
      "the first instant after the gap and an interval schedule skips the missing times; croner " +
      "moves each missing wall time forward by the gap's length (02:30 -> 03:30)",
    applies: (k) => [k.truth, k.croner].some((x) => x !== null &&
      afterGap(k.zone, x) !== null &&
      civilMatches(k.e, fromCivilSeconds(civilSeconds(civilOf(k.zone, x)) - afterGap(k.zone, x)))),
  },
  {
    id: "short-overlap",
    reason: "docs/semantics.md DST: a fixed-time schedule fires at the first occurrence in a " +
      "fall-back overlap of any length; croner looks for the first occurrence one hour back, " +
      "so in Lord Howe's 30-minute overlap it fires at the second",
    applies: (k) => k.e.fixed && k.croner !== null && inOverlap(k.zone, k.croner),
  },
];

// Whether a transition of the zone lies between a and b (a pass or a gap skipped between two
// answers would have one there).
function spanHasTransition(zone, a, b) {
  const lo = Math.min(a, b), hi = Math.max(a, b);
  return zoneTransitions.get(zone).some((t) => t.at > lo && t.at <= hi);
}

// ---------------------------------------------------------------------------------------------
// Cases.
const started = Date.now();
console.log(`cron_diff: seed ${SEED}, ${CASES} expressions, zones ${ZONES.join(" ")}, ` +
  `starts ${YEARS[0]}-${YEARS[1]}`);
const zoneTransitions = new Map(ZONES.map((z) => [z, transitions(z)]));
const cases = [];
for (let i = 0; i < CASES; ++i) {
  const zone = ZONES[i % ZONES.length];
  const trs = zoneTransitions.get(zone).filter((t) => t.at < Date.UTC(2023, 0, 1) / 1000 ||
    zone !== "Asia/Tehran");
  const tr = pick(trs);
  let from, hour;
  const kind = uni(0, 9);
  if (kind <= 6) {
    // Near a transition: the hour field is a wall hour on one side of it, half of the time.
    if (uni(0, 1)) hour = String(civilOf(zone, tr.at + pick([-1, 0]) * 60 * uni(1, 90)).h);
    from = tr.at + pick([
      () => uni(-3 * 3600, 3 * 3600), // within three hours
      () => uni(-300, 300), // within five minutes
      () => uni(-1, 1), // at the transition
      () => uni(-3, 3) * 86400 + uni(-3600, 3600), // days away
    ])();
  } else {
    from = uni(Date.UTC(YEARS[0], 0, 1) / 1000, Date.UTC(YEARS[1], 0, 1) / 1000);
  }
  cases.push({ expr: expression(hour), zone, from });
}

// gnomon: one driver process answers every query.
const lines = [];
for (const c of cases) {
  for (const dir of ["next", "prev"]) lines.push([c.expr, c.zone, iso(c.from), dir, RUNS].join("\t"));
}
const run = spawnSync(DRIVER, [], { input: lines.join("\n") + "\n", maxBuffer: 1 << 28 });
if (run.status !== 0) {
  console.error(`cron_diff: FAIL: the driver exited with ${run.status}: ${run.stderr}`);
  process.exit(1);
}
const answers = run.stdout.toString().trimEnd().split("\n");
const gnomonMs = Date.now() - started;

// croner, configured to gnomon's rules: Vixie OR (legacyMode), `a/n` accepted (sloppyRanges).
// gnomon's unrestricted day fields are `*`, `?` and `*/1`; croner's only `*`: given as `*`.
function cronerText(expr) {
  const f = expr.split(" ");
  const dayAt = f.length === 5 ? [2, 4] : [3, 5];
  for (const i of dayAt) if (f[i] === "?" || f[i] === "*/1") f[i] = "*";
  return f.join(" ");
}
function croner(expr, zone, from, dir) {
  const job = new Cron(cronerText(expr), { timezone: zone, paused: true, legacyMode: true,
    sloppyRanges: true });
  const dates = dir === "next" ? job.nextRuns(RUNS, new Date(from * 1000))
    : job.previousRuns(RUNS, new Date(from * 1000));
  return dates.map((d) => Math.floor(d.getTime() / 1000));
}

const stats = { queries: 0, selfChecks: 0, dstChecks: 0, agree: 0, disagree: 0, known: {}, cronerErrors: 0 };
const failures = [];
const judged = [];
let k = 0;
for (const c of cases) {
  for (const dir of ["next", "prev"]) {
    const answer = answers[k++];
    stats.queries++;
    const ctx = `"${c.expr}" ${c.zone} ${dir} from ${iso(c.from)}`;
    if (answer.startsWith("error")) {
      failures.push(`${ctx}: gnomon rejects it: ${answer}`);
      continue;
    }
    const g = answer.split(" ").filter((x) => x !== "none").map((x) => Date.parse(x) / 1000);
    let cr;
    try {
      cr = croner(c.expr, c.zone, c.from, dir);
    } catch (err) {
      if (!stats.cronerErrors++) console.log(`  croner throws, e.g. ${ctx}: ${err.message}`);
      if (process.env.CRON_DIFF_VERBOSE) console.log(`  croner throws: ${ctx}`);
      cr = null;
    }
    const e = parseForJudge(c.expr);
    const within = (xs) => xs.filter((x) => Math.abs(x - c.from) <= HORIZON_S);
    if (cr === null) {
      // croner threw (previousRuns does with some month fields): the judge checks gnomon alone.
      const truth = judge(e, c.zone, c.from, dir);
      if ((g.length ? g[0] : null) !== truth) {
        failures.push(`${ctx}: gnomon ${iso(g[0] ?? null)}, judge ${iso(truth)} (croner threw)`);
      }
      continue;
    }
    const gs = within(g), cs = within(cr);
    let i = 0;
    while (i < RUNS && i < gs.length && i < cs.length && gs[i] === cs[i]) ++i;
    // Where croner is known to differ from gnomon's rules (a DST transition between two answers),
    // an agreement proves nothing (both could skip a second pass): the judge checks those steps.
    for (let j = 0; j < i; ++j) {
      const a = j === 0 ? c.from : gs[j - 1];
      if (!spanHasTransition(c.zone, a, gs[j])) continue;
      stats.dstChecks++;
      const truth = judge(e, c.zone, a, dir);
      if (truth !== gs[j]) {
        failures.push(`gnomon and croner are both wrong: ${ctx}: fire ${j + 1} (after ${iso(a)}): ` +
          `both ${iso(gs[j])}, judge ${iso(truth)}`);
        break;
      }
    }
    if (i === RUNS || (i === gs.length && i === cs.length)) {
      stats.agree++;
      // The judge checks itself on a sample of agreements: both implementations against it.
      if (stats.agree % 25 === 0) {
        stats.selfChecks++;
        const truth = judge(e, c.zone, c.from, dir);
        if (truth !== (gs.length ? gs[0] : null)) {
          failures.push(`${ctx}: the judge says ${iso(truth)}, gnomon and croner ${iso(gs[0] ?? null)}`);
        }
      }
      continue;
    }
    stats.disagree++;
    const start = i === 0 ? c.from : gs[i - 1];
    const truth = judge(e, c.zone, start, dir);
    const gi = i < gs.length ? gs[i] : null, ci = i < cs.length ? cs[i] : null;
    const detail = `${ctx}: fire ${i + 1} (after ${iso(start)}): gnomon ${iso(gi)}, croner ` +
      `${iso(ci)}, judge ${iso(truth)}`;
    judged.push(detail);
    if (gi !== truth) {
      failures.push(`gnomon is wrong: ${detail}`);
      continue;
    }
    const known = KNOWN_DIFFERENCES.find((kd) =>
      kd.applies({ e, zone: c.zone, dir, start, truth, croner: ci }));
    if (!known) {
      failures.push(`unexplained croner difference: ${detail}`);
      continue;
    }
    stats.known[known.id] = (stats.known[known.id] ?? 0) + 1;
  }
}

const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`cron_diff: ${stats.queries} queries (${RUNS} fires each), ${stats.agree} agree, ` +
  `${stats.disagree} disagree (judged), croner threw on ${stats.cronerErrors} (gnomon judged alone); ` +
  `the judge checked ${stats.dstChecks} agreed answers with a DST transition since the ` +
  `previous one and ${stats.selfChecks} sampled agreements; ` +
  `gnomon answered all in ${gnomonMs} ms; ${seconds} s in all`);
for (const kd of KNOWN_DIFFERENCES) {
  console.log(`  known difference ${kd.id}: ${stats.known[kd.id] ?? 0} (${kd.reason})`);
}
if (process.env.CRON_DIFF_VERBOSE) for (const j of judged) console.log(`  ${j}`);
if (failures.length) {
  console.log(`cron_diff: FAIL: ${failures.length} disagreement(s) not explained:`);
  for (const f of failures.slice(0, 50)) console.log(`  ${f}`);
  process.exit(1);
}
console.log("cron_diff: OK");
