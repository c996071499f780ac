"""Order statistics and trial-level intervals, pure Python (the bench extra adds only httpx).

The unit of ``compare`` is the trial: requests inside one trial share the server's state (batch
composition, caches, clocks), so they are not independent samples and a per-request interval would
be far too narrow. Two methods, chosen by the number of trials:

* **Bootstrap** (both sides ≥ :data:`MIN_BOOTSTRAP_TRIALS` trials): resample trials with
  replacement within A and within B, take the ratio of medians, 95 % percentile interval over
  :data:`BOOTSTRAP_REPS` resamples (seeded, so a comparison is reproducible).
* **Permutation inversion** (fewer trials): the interval is every ratio ``r`` for which a
  two-sided permutation test of "B's trials and ``r`` × A's trials come from one distribution"
  (statistic: difference of medians of logs) is *not* rejected at 5 %. It is exact but coarse:
  with n and m trials only C(n+m, n) splits exist, so the smallest p-value is 2 / C(n+m, n), and
  the median statistic ties on many splits, which raises it further. With 3 + 3 trials it is at
  least 0.1: no difference can ever be called real, and the interval is unbounded (``None``).
  4 + 4 (p ≥ 0.029) is the least that can decide anything; 5 + 5 or more is what to plan for.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

MIN_BOOTSTRAP_TRIALS = 8
BOOTSTRAP_REPS = 4000
PERMUTATION_MAX_SPLITS = 20000


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100), linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50.0)


def _ratio_of_medians(a: Sequence[float], b: Sequence[float]) -> float | None:
    ma, mb = median(a), median(b)
    if ma is None or mb is None or ma <= 0:
        return None
    return mb / ma


def bootstrap_ratio_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of median(B)/median(A), resampling trials."""
    rng = random.Random(seed)
    ratios: list[float] = []
    for _ in range(BOOTSTRAP_REPS):
        r = _ratio_of_medians(rng.choices(a, k=len(a)), rng.choices(b, k=len(b)))
        if r is not None:
            ratios.append(r)
    if len(ratios) < BOOTSTRAP_REPS // 2:
        return None
    lo, hi = percentile(ratios, 2.5), percentile(ratios, 97.5)
    assert lo is not None and hi is not None
    return lo, hi


def _splits(n: int, total: int, *, seed: int) -> list[tuple[int, ...]]:
    if math.comb(total, n) <= PERMUTATION_MAX_SPLITS:
        return list(itertools.combinations(range(total), n))
    rng = random.Random(seed)
    return [tuple(sorted(rng.sample(range(total), n))) for _ in range(PERMUTATION_MAX_SPLITS)]


def permutation_p(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> float:
    """Two-sided permutation p-value of |median(log B) − median(log A)| (values must be > 0)."""
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    pooled = la + lb
    observed = abs((median(lb) or 0.0) - (median(la) or 0.0))
    splits = _splits(len(la), len(pooled), seed=seed)
    hits = 0
    for idx in splits:
        chosen = set(idx)
        xa = [pooled[i] for i in idx]
        xb = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        if abs((median(xb) or 0.0) - (median(xa) or 0.0)) >= observed - 1e-12:
            hits += 1
    return hits / len(splits)


def permutation_ratio_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> tuple[float, float] | None:
    """95 % interval of the ratio B/A by inverting the permutation test; None when unbounded."""
    if min(len(a), len(b)) < 1 or min(*a, *b) <= 0:
        return None
    # The p-value as a function of r only changes where r·a_i crosses some b_j: test between those points.
    cuts = sorted({bj / ai for ai in a for bj in b})
    probes = [cuts[0] * 0.5, *((x + y) / 2 for x, y in itertools.pairwise(cuts)), *cuts, cuts[-1] * 2.0]
    accepted = [r for r in sorted(probes) if permutation_p([r * x for x in a], b, seed=seed) > 0.05]
    if not accepted or accepted[0] == probes[0] or accepted[-1] == max(probes):
        return None  # the test cannot reject even far-off ratios: too few trials
    return accepted[0], accepted[-1]


def ratio_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> tuple[tuple[float, float] | None, str]:
    """The interval of median(B)/median(A) and the method's name (see the module docstring)."""
    if min(len(a), len(b)) >= MIN_BOOTSTRAP_TRIALS:
        return bootstrap_ratio_ci(a, b, seed=seed), f"bootstrap over trials ({BOOTSTRAP_REPS} resamples)"
    splits = math.comb(len(a) + len(b), len(a)) if a and b else 0
    return permutation_ratio_ci(a, b, seed=seed), f"permutation-test inversion ({splits} splits)"
