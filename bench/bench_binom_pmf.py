"""Per-call cost of the binomial pmf: log-gamma directly (pipeline/report/findings.py, the
exact test's bounds) against ``scipy.stats.binom.pmf``, for a range of trial counts.

Run: ``nice python bench/bench_binom_pmf.py``; results in bench/RESULTS.md.
"""
import math
import timeit

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom

p0 = 0.1
for n in (10, 100, 1000, 10000):
    k = np.arange(n + 1)

    def direct():
        return np.exp(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + k * math.log(p0) + (n - k) * math.log1p(-p0))

    def scipy_pmf():
        return binom.pmf(k, n, p0)

    assert np.allclose(direct(), scipy_pmf())
    t = {f.__name__: min(timeit.repeat(f, number=200, repeat=5)) / 200 for f in (direct, scipy_pmf)}
    print(f"n={n}: direct {t['direct'] * 1e6:.0f} us, scipy {t['scipy_pmf'] * 1e6:.0f} us, ratio {t['scipy_pmf'] / t['direct']:.1f}")
