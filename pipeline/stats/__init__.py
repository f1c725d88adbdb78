"""Reliability statistics: failures, exposure, AFR, survival, Weibull, comparisons, modes.

The public surface is re-exported here; the ``stats`` stage is :mod:`pipeline.stats.stage`
and the ``afr`` / ``survival`` commands are in :mod:`pipeline.stats.commands`.
"""

from pipeline.stats.rates import poisson_interval
from pipeline.stats.api import afr, compare, lifetimes, survival, weibull
from pipeline.stats.comparisons import rate_ratio_test
from pipeline.stats.exposure import Window, data_window
from pipeline.stats.sources import Lifetimes, lifetime_frame, read_lifetime_table
from pipeline.stats.weibull_fit import describe_shape

__all__ = [
    "Lifetimes", "Window", "afr", "compare", "data_window", "describe_shape", "lifetime_frame",
    "lifetimes", "poisson_interval", "rate_ratio_test", "read_lifetime_table", "survival", "weibull",
]
