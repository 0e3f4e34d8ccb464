"""Unit tests of the chaos checker's fence rule (checker.py): catch-up runs are judged in claim
order, every other first attempt in scheduled-instant order."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

T0 = 1796012540000  # ms, a whole second


def start(sec, token, started_ms, node="n1", attempt=1):
    ms = T0 + sec * 1000
    iso = checker.datetime.datetime.fromtimestamp(
        ms / 1000, tz=checker.datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {"kind": "start", "job": "tick", "run": "tick@%d" % ms, "token": token,
            "attempt": attempt, "node": node, "scheduled": iso, "started": started_ms}


def claimed(sec, catch_up=False):
    e = {"event": "claimed", "run": "tick@%d" % (T0 + sec * 1000), "ts_ms": T0 + sec * 1000}
    if catch_up:
        e["catch_up"] = "true"
    return e


def regressions(records, events):
    res = checker.check(records, {"n1": events}, every_second_jobs=())
    return res["fence_regressions"], res["violations"]


class FenceRuleTest(unittest.TestCase):
    def test_tokens_in_instant_order_pass(self):
        recs = [start(0, 10, T0), start(1, 20, T0 + 1000), start(2, 30, T0 + 2000)]
        self.assertEqual(regressions(recs, [])[0], 0)

    def test_a_later_fire_with_a_lower_token_is_a_regression(self):
        recs = [start(0, 10, T0), start(1, 5, T0 + 1000)]
        self.assertEqual(regressions(recs, [])[0], 1)

    def test_a_catch_up_claimed_after_a_later_fire_is_judged_in_claim_order(self):
        # :1 missed in an outage, :2 ran on time (token 20), then the catch-up of :1 (token 25).
        recs = [start(0, 10, T0), start(2, 20, T0 + 2000), start(1, 25, T0 + 2500)]
        events = [claimed(1, catch_up=True)]
        self.assertEqual(regressions(recs, events)[0], 0)
        # The same records without the catch-up label: :2 token 20 < :1 token 25 by instant.
        self.assertEqual(regressions(recs, [claimed(1)])[0], 1)

    def test_a_catch_up_with_a_token_below_an_earlier_claim_is_a_regression(self):
        recs = [start(0, 10, T0), start(2, 20, T0 + 2000), start(1, 15, T0 + 2500)]
        count, violations = regressions(recs, [claimed(1, catch_up=True)])
        self.assertEqual(count, 1)
        self.assertIn("catch-up", violations[0])

    def test_attempts_of_one_fire_must_increase(self):
        recs = [start(0, 10, T0), start(0, 9, T0 + 500, attempt=2)]
        self.assertEqual(regressions(recs, [])[0], 1)


if __name__ == "__main__":
    unittest.main()
