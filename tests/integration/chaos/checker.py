"""The chaos CHECKER: pure functions over what a scenario recorded. Python 3 stdlib only.

Inputs
- records: the JSON lines the job commands appended to the shared file. A "start" record is written
  when the command begins (job, run, token, attempt, node, scheduled, started); `started` is the
  host's wall clock in ms taken with `env -u LD_PRELOAD -u FAKETIME date +%s%3N`, so it is never
  skewed by libfaketime (the backend, redis-server on this host, uses the same clock). Long jobs
  also append an "end" record (same fields, kind "end") when they finish their sleep.
- logs: node id -> list of parsed log events (key=value lines of `gnomon serve` stderr).
- windows: outage windows [(from_ms, to_ms)] declared by the scenario (F3/F6), inside which the
  misfire policy may skip fires.

Checks (each a count in the result; any non-zero in `violations` fails the scenario)
- duplicates: a fire (job, run id) with more than one first-attempt start record, or any
  (run id, attempt) recorded twice.
- fence_regressions: docs/guarantees.md: the token "strictly increases per job across all claims and
  attempts", i.e. in the order the claims are made. Checked as: for one job, the first-attempt
  start records ordered by scheduled instant carry strictly increasing tokens (equal or lower =
  regression), except misfire catch-up runs (a node logged `claimed ... catch_up=true` for the
  fire: misfire = once runs the latest missed fire after an outage, possibly after a later fire
  already ran); a catch-up run's token must instead be higher than that of every start of the job
  that began (host clock) more than 100 ms before it.
  Within one fire, attempt n+1 must carry a strictly higher token than attempt n.
- early_starts: a start record whose (unskewed) start time is earlier than scheduled instant minus
  skew_tolerance.
- misses: for each every-second job, every second between its first and last recorded fire must
  have a start record, unless the logs show the policy accounted for it: `skipped detail=misfire`
  (or any recorded skip) inside a declared outage window (1 s before to 2.5 s after it),
  `skipped detail=overlap` when a live lease of the same job visibly existed (some node logged
  `claimed` for another fire of the job at most lease_ttl + 1 s before the skip; an overlap against
  a claim nobody logged is a "ghost" and counts as a miss), or `lost_run` with on_lost = fail (the
  holder died before the command could record). Everything else (no record, no log, or `skipped`
  for another reason) is a miss. Seconds before `since_ms` (the first node's start) are not
  counted; runs of fires scheduled before it are reported as `stale_runs`.
- unrecorded: a fire inside a declared outage window that neither ran nor was logged `skipped`:
  not a miss (the outage allows it) but a history gap, since docs/semantics.md says fires whose
  claim failed on a backend error go through the misfire policy and the ones not run are recorded
  `skipped`. Counted separately; also a violation.
- fenced_accepted: a completion from a fenced-off holder that the backend accepted. From the logs:
  node N logged `self_fenced` or `lease_renew_failed` with "lease lost" for (run, token), or any node
  logged `lost_run` for (run, token); if N then logged `run_finished ... outcome=succeeded` for that
  same (run, token) and did NOT log an `error` whose detail starts with "report:" for that run
  right after, the backend accepted a stale completion. (Kept simple: it relies on gnomon logging
  the rejected report as an `error` event, which the scheduler does for every failed Report.)
"""
import datetime
import re

_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def parse_rfc3339_ms(text):
    dt = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)
    return int(round(dt.timestamp() * 1000))


def parse_log_line(line):
    """`<ts> <level> <event> k=v ...` -> dict with ts, level, event and the pairs (or None)."""
    parts = line.split(" ", 3)
    if len(parts) < 3 or not parts[0][:4].isdigit():
        return None
    ev = {"ts": parts[0], "level": parts[1], "event": parts[2]}
    for k, v in _KV.findall(parts[3] if len(parts) > 3 else ""):
        if v.startswith('"') and v.endswith('"') and len(v) >= 2:
            v = v[1:-1].replace('\\"', '"')
        ev[k] = v
    try:
        ev["ts_ms"] = parse_rfc3339_ms(parts[0])
    except ValueError:
        ev["ts_ms"] = 0
    return ev


def parse_log(text):
    return [e for e in (parse_log_line(l) for l in text.splitlines()) if e]


def catch_up_runs(logs, event="claimed"):
    """Run ids of the `event` events (claimed, skipped) of misfire catch-up claims
    (`... catch_up=true`)."""
    return {e["run"] for evs in logs.values() for e in evs
            if e["event"] == event and e.get("catch_up") == "true"}


def check(records, logs, *, every_second_jobs, skew_tolerance_ms=500, windows=(),
          slack_before_ms=1000, slack_after_ms=2500, on_lost=None, since_ms=None,
          lease_ttl_ms=3000):
    """Returns a dict of figures; result["violations"] lists human-readable failures."""
    on_lost = on_lost or {}
    starts = [r for r in records if r.get("kind", "start") == "start"]
    for r in starts:
        r["scheduled_ms"] = parse_rfc3339_ms(r["scheduled"])
    res = {"records": len(starts), "duplicates": 0, "fence_regressions": 0, "early_starts": 0,
           "misses": 0, "unrecorded": 0, "skipped_policy": 0, "lost": 0, "fenced_accepted": 0,
           "max_lateness_ms": 0, "violations": []}
    v = res["violations"]

    # --- duplicates
    by_fire = {}
    by_attempt = {}
    for r in starts:
        by_fire.setdefault((r["job"], r["run"]), []).append(r)
        by_attempt.setdefault((r["run"], r["attempt"]), []).append(r)
    for (job, run), rs in by_fire.items():
        firsts = [r for r in rs if r["attempt"] == 1]
        if len(firsts) > 1:
            res["duplicates"] += 1
            v.append("duplicate: %s first attempt ran %d times on %s (tokens %s)" % (
                run, len(firsts), [r["node"] for r in firsts], [r["token"] for r in firsts]))
    for (run, attempt), rs in by_attempt.items():
        if attempt != 1 and len(rs) > 1:
            res["duplicates"] += 1
            v.append("duplicate: %s attempt %d ran %d times" % (run, attempt, len(rs)))

    # --- fence regressions
    caught_up = catch_up_runs(logs)

    def catch_up(r):
        return r["attempt"] == 1 and r["run"] in caught_up
    for job in sorted({r["job"] for r in starts}):
        for c in (r for r in starts if r["job"] == job and catch_up(r)):
            for r in starts:
                if r["job"] == job and r["started"] < c["started"] - 100 and \
                        r["token"] >= c["token"]:
                    res["fence_regressions"] += 1
                    v.append("fence regression: catch-up %s token %d after %s token %d" % (
                        c["run"], c["token"], r["run"], r["token"]))
        firsts = sorted((r for r in starts if r["job"] == job and r["attempt"] == 1 and
                         not catch_up(r)), key=lambda r: r["scheduled_ms"])
        for a, b in zip(firsts, firsts[1:]):
            if b["scheduled_ms"] > a["scheduled_ms"] and b["token"] <= a["token"]:
                res["fence_regressions"] += 1
                v.append("fence regression: %s token %d after %s token %d" % (
                    b["run"], b["token"], a["run"], a["token"]))
    for (job, run), rs in by_fire.items():
        rs = sorted(rs, key=lambda r: r["attempt"])
        for a, b in zip(rs, rs[1:]):
            if b["attempt"] > a["attempt"] and b["token"] <= a["token"]:
                res["fence_regressions"] += 1
                v.append("fence regression: %s attempt %d token %d <= attempt %d token %d" % (
                    run, b["attempt"], b["token"], a["attempt"], a["token"]))

    # --- early starts, lateness
    for r in starts:
        early = r["scheduled_ms"] - r["started"]
        if early > skew_tolerance_ms:
            res["early_starts"] += 1
            v.append("early start: %s on %s started %d ms before its instant" % (
                r["run"], r["node"], early))
        if r["attempt"] == 1:
            res["max_lateness_ms"] = max(res["max_lateness_ms"], r["started"] - r["scheduled_ms"])

    # --- log index by run id
    all_events = [e for evs in logs.values() for e in evs]
    by_run = {}
    for e in all_events:
        if e.get("run"):
            by_run.setdefault(e["run"], []).append(e)

    # --- misses
    def in_window(ms):
        return any(lo - slack_before_ms <= ms <= hi + slack_after_ms for lo, hi in windows)

    claims_by_job = {}
    for e in all_events:
        if e["event"] == "claimed":
            claims_by_job.setdefault(e.get("job"), []).append(e)

    def visible_holder(job, run, skip_ts):
        # An overlap skip is the policy only if another fire of the job really held a live lease:
        # some node logged `claimed` for it at most lease_ttl (+1 s) before the skip. (A claim the
        # backend executed after its client had given up is held by nobody: "ghost" overlap.)
        return any(c.get("run") != run and skip_ts - lease_ttl_ms - 1000 <= c["ts_ms"] <= skip_ts + 100
                   for c in claims_by_job.get(job, []))

    if since_ms is not None:
        res["stale_runs"] = len([r for r in starts if r["scheduled_ms"] < since_ms - 1000])

    res["miss_list"] = []
    for job in every_second_jobs:
        secs = sorted({r["scheduled_ms"] // 1000 for r in starts if r["job"] == job})
        if not secs:
            res["misses"] += 1
            v.append("miss: job %s never ran" % job)
            continue
        have = set(secs)
        first = secs[0] if since_ms is None else max(secs[0], since_ms // 1000 + 1)
        for s in range(first, secs[-1] + 1):
            if s in have:
                continue
            run = "%s@%d" % (job, s * 1000)
            evs = by_run.get(run, [])
            skips = [e for e in evs if e["event"] == "skipped"]
            details = {e.get("detail", "") for e in skips}
            lost = [e for e in evs if e["event"] == "lost_run"]
            if "misfire" in details and in_window(s * 1000):
                res["skipped_policy"] += 1
            elif in_window(s * 1000) and (details or any(
                    e["event"] in ("run_finished", "lost_run") for e in evs)):
                res["skipped_policy"] += 1
            elif "overlap" in details and any(visible_holder(job, run, e["ts_ms"]) for e in skips
                                              if e.get("detail") == "overlap"):
                res["skipped_policy"] += 1
            elif lost and on_lost.get(job, "fail") == "fail":
                res["lost"] += 1
            elif in_window(s * 1000) and not details:
                # Missed during the outage (allowed) but neither run nor recorded skipped: the
                # policy says these are recorded, so this is a history gap, reported on its own.
                res["unrecorded"] += 1
                v.append("unrecorded: %s (inside the outage) neither ran nor was recorded skipped"
                         % run)
            else:
                res["misses"] += 1
                res["miss_list"].append(run)
                v.append("miss: %s has no run (log events: %s)" % (
                    run, sorted({e["event"] + ":" + e.get("detail", "") for e in evs}) or "none"))

    # --- completions from fenced-off holders that were accepted
    for node, evs in logs.items():
        fenced = {}  # run id -> tokens fenced off on this node (None: the event had no token)
        for i, e in enumerate(evs):
            if e["event"] == "self_fenced" or (
                    e["event"] == "lease_renew_failed" and "leaselost" in e.get("detail", "").replace(" ", "").lower()):
                fenced.setdefault(e.get("run"), set()).add(e.get("token") or None)
            if e["event"] == "run_finished" and e.get("outcome") == "succeeded":
                lost_by_peer = any(x["event"] == "lost_run" and x.get("token") == e.get("token")
                                   for x in by_run.get(e.get("run"), []))
                toks = fenced.get(e.get("run"), set())
                if None in toks or e.get("token") in toks or lost_by_peer:
                    rejected = any(x["event"] == "error" and x.get("run") == e.get("run")
                                   and x.get("detail", "").startswith("report:")
                                   for x in evs[i + 1:i + 20])
                    if not rejected:
                        res["fenced_accepted"] += 1
                        v.append("fenced completion accepted: %s token %s on %s" % (
                            e.get("run"), e.get("token"), node))
    return res
