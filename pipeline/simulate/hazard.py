"""Weibull failure times per model and batch, and the true failure rate of each group.

Reads nothing, writes nothing. A GPU of age ``t`` years has cumulative hazard
``H(t) = a * (t / lam) ** k`` (``a`` is the acceleration factor, 1 for a realistic fleet).
A GPU alive at age ``t0`` fails at the age ``T`` with ``H(T) = H(t0) + E``, ``E ~ Exp(1)``:
exact inverse-transform sampling of the conditional Weibull, so left-truncated GPUs (in
service before the window opens) are treated correctly.
"""

from __future__ import annotations

import numpy as np

from pipeline.simulate.fleet import BATCHES, RMA_SHAPE_SCALE

YEAR_DAYS = 365.25


def batch_params(batch: str, model: str) -> tuple[float, float]:
    """(shape k, scale lam in years) of a batch; ``<model>-RMA`` boards use the model's base."""
    for b in BATCHES:
        if b.batch == batch:
            return b.shape, b.scale_years
    return RMA_SHAPE_SCALE[model]


def cum_hazard(age_years: np.ndarray, shape: float, scale: float, accel: float = 1.0) -> np.ndarray:
    """``H(t) = accel * (t / scale) ** shape`` for ages in years (negative ages count as 0)."""
    return accel * (np.clip(age_years, 0.0, None) / scale) ** shape


def sample_failure_age(age0_years: np.ndarray, shape: float, scale: float, accel: float,
                       rng: np.random.Generator) -> np.ndarray:
    """Age (years) at failure of GPUs known alive at ``age0_years``."""
    e = rng.exponential(1.0, size=np.shape(age0_years))
    h = cum_hazard(age0_years, shape, scale, accel) + e
    return scale * (h / accel) ** (1.0 / shape)


def effective_scale(shape: float, scale: float, accel: float) -> float:
    """The Weibull scale that the accelerated hazard has: ``accel (t/lam)^k = (t/lam')^k``."""
    return scale * accel ** (-1.0 / shape)


def expected_failures(age0_years: np.ndarray, age1_years: np.ndarray, shape: float, scale: float,
                      accel: float = 1.0) -> np.ndarray:
    """Expected failures of each GPU over its exposure, ``H(age1) - H(age0)``."""
    return cum_hazard(age1_years, shape, scale, accel) - cum_hazard(age0_years, shape, scale, accel)
