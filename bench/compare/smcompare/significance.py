"""Whether two sets of per-round values differ: a two-sided Mann-Whitney U test at 95% (scipy's).

--compare's "significant" and the winners' "apart" both ask it of the rounds of two rows. It assumes
nothing of the values' distribution, only that each round is an independent draw; it ranks the values of
both sets together, so its smallest possible p-value, 2 / C(n1 + n2, n1) when every value of one set is
below every value of the other, depends only on the two counts: 0.1 for 3 and 3 rounds (--quick can never
show a difference), 0.029 for 4 and 4, 0.0079 for 5 and 5 (the default). Below the level it is not run.
"""

from __future__ import annotations

import math
import sys

TEST = "Mann-Whitney U"
ALPHA = 0.05    # significant: p < ALPHA (95%)
TOO_FEW = "not enough rounds"


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact test of n1 and n2 values can give (1 without values)."""
    return 1.0 if not n1 or not n2 else min(1.0, 2 / math.comb(n1 + n2, n1))


def rounds_needed() -> int:
    """The fewest rounds, as many on each side, whose test can reach p < ALPHA (4)."""
    n = 1
    while smallest_p(n, n) >= ALPHA:
        n += 1
    return n


def untested(reason: str | None) -> dict:
    """A result of no test run (reason None: nothing to test against, as a winner without a runner-up)."""
    return {"test": TEST, "n": None, "p": None, "significant": None, "reason": reason}


def mann_whitney(a: list[float | int | None], b: list[float | int | None]) -> dict:
    """The Mann-Whitney U test (two-sided) of a against b, their None values dropped: {"test", "n": [n1, n2],
    "p", "significant": p < ALPHA, "reason": None}; p and significant None with the reason when it was not
    run (too few values to ever reach the level, or scipy missing). Identical values are not significant."""
    xs, ys = [v for v in a if v is not None], [v for v in b if v is not None]
    out = {"test": TEST, "n": [len(xs), len(ys)], "p": None, "significant": None, "reason": None}
    if smallest_p(len(xs), len(ys)) >= ALPHA:
        need = rounds_needed()
        out["reason"] = f"{TOO_FEW} ({len(xs)} and {len(ys)}; the test needs at least {need} and {need})"
        return out
    if len(set(xs + ys)) == 1:
        out.update(p=1.0, significant=False)    # all tied: nothing to rank (scipy's answer varies by version)
        return out
    try:
        from scipy.stats import mannwhitneyu  # noqa: PLC0415 - only when there is something to test
    except ImportError:
        out["reason"] = f"not tested: scipy is not installed for {sys.executable} (Debian: python3-scipy)"
        return out
    p = float(mannwhitneyu(xs, ys, alternative="two-sided", method="auto").pvalue)
    if not math.isfinite(p):
        out["reason"] = "not tested: the test gave no p-value"
        return out
    out.update(p=p, significant=p < ALPHA)
    return out


def fmt_p(p: float | None) -> str:
    """A p-value as tables show it, 2 significant digits (0.4, 0.0079, <0.001), more where those would
    round it across the level (0.0498, not 0.05)."""
    if p is None:
        return "-"
    if p < 0.001:
        return "<0.001"
    digits = 2
    while digits < 6 and (float(f"{p:.{digits}g}") < ALPHA) != (p < ALPHA):
        digits += 1
    return f"{p:.{digits}g}"


def verdict(significant: bool | None, p: float | None, reason: str | None) -> str:
    """A test's result (as a comparison row or a winner keeps it) in a few words: "significant p 0.0079",
    "not significant p 0.4", "not enough rounds", "not tested"."""
    if significant is None:
        return TOO_FEW if str(reason).startswith(TOO_FEW) else "not tested"
    return f"{'' if significant else 'not '}significant" + (f" p {fmt_p(p)}" if p is not None else "")


# What the tables' legends say of it.
_N = rounds_needed()
LEGEND = (f"a two-sided {TEST} test of the two sets of per-round values at {1 - ALPHA:.0%} (p < {ALPHA:g}); too few "
          f"rounds can never reach that level ({_N - 1} and {_N - 1}: {TOO_FEW}; {_N} and {_N} can)")
