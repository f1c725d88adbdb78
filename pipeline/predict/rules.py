"""The transparent rule baseline: critical Xids in the last days.

Reads and writes nothing (works on a features frame). Its score is the number of
critical-severity Xids a GPU logged in the last 7 days (today's counting double, so a fresh
burst ranks first); it alerts at one or more. Its risk is the replacement rate observed for
the same score in past data (a smoothed lookup table), so it is calibrated by construction
and can be compared with the model on every metric. With no failures to learn from, the
table falls back to :data:`PRIOR_RATES`, marked uncalibrated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Score bucket upper bounds: 0, 1, 2, 3-4, 5-9, 10+.
BUCKETS: tuple[float, ...] = (0, 1, 2, 4, 9, np.inf)

#: Rates used when there is nothing to calibrate on (no failures yet): a guess, said so.
PRIOR_RATES: tuple[float, ...] = (0.001, 0.05, 0.10, 0.20, 0.35, 0.50)


def rule_score(frame: pd.DataFrame) -> np.ndarray:
    """Critical Xids in the last 7 days, plus today's again."""
    return (frame["xid_crit_7d"].fillna(0) + frame["xid_crit_1d"].fillna(0)).to_numpy(dtype=float)


def rule_alert(frame: pd.DataFrame) -> np.ndarray:
    """The baseline's alert: at least one critical Xid in the last 7 days."""
    return rule_score(frame) >= 1


def _bucket(score: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(BUCKETS), score, side="left")


@dataclass
class RuleBaseline:
    """Critical-Xid rule with an observed-rate lookup table as its calibrated risk.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"xid_crit_7d": [0, 0, 3, 3], "xid_crit_1d": [0, 0, 1, 0]})
    >>> RuleBaseline().fit(f, [0, 0, 1, 0]).predict_proba(f)[:, 1].round(2).tolist()
    [0.08, 0.08, 0.5, 0.5]
    """

    prior_strength: float = 2.0
    rates_: list[float] = field(default_factory=lambda: list(PRIOR_RATES))
    calibrated_: bool = False

    def fit(self, frame: pd.DataFrame, y) -> RuleBaseline:
        """Observed replacement rate per score bucket, shrunk toward the overall rate."""
        y = np.asarray(y, dtype=float)
        if y.sum() == 0:
            self.rates_, self.calibrated_ = list(PRIOR_RATES), False
            return self
        b = _bucket(rule_score(frame))
        base = y.mean()
        rates = []
        for i in range(len(BUCKETS)):
            m = b == i
            rates.append(float((y[m].sum() + self.prior_strength * base) / (m.sum() + self.prior_strength)))
        # More critical Xids never means less risk.
        self.rates_ = list(np.maximum.accumulate(rates))
        self.calibrated_ = True
        return self

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        p = np.asarray(self.rates_)[_bucket(rule_score(frame))]
        return np.column_stack([1 - p, p])

    def to_dict(self) -> dict:
        return {"buckets": [b if np.isfinite(b) else None for b in BUCKETS], "rates": self.rates_,
                "calibrated": self.calibrated_}

    @classmethod
    def from_dict(cls, d: dict) -> RuleBaseline:
        return cls(rates_=list(d["rates"]), calibrated_=bool(d["calibrated"]))
