"""The promotion bar: hand-made out-of-fold pools at each edge of it, and the card that says why.

Each pool is built here (no warehouse, no trees): GPUs with ten days each, some failing,
and two rankers whose PR-AUCs are known, so that exactly one condition of the bar decides.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score

from pipeline.config import Predict
from pipeline.predict import model
from pipeline.predict.train import CrossValidation, promotion, promotion_bar

ROOT = Path(__file__).resolve().parents[1]
P = Predict()  # the shipped bar: 3 folds, 15 failed GPUs


def _pool(folds: int, failures: int, *, better: bool, gpus: int = 300, seed: int = 0) -> CrossValidation:
    """Out-of-fold GPU-days over ``folds`` folds with ``failures`` failed GPUs (their last 5
    days positive). ``better``: the model ranks every positive day first and the evidence
    score barely does; else both rankers are the same scores."""
    rng = np.random.default_rng(seed)
    serial = np.repeat([f"g{i:03d}" for i in range(gpus)], 10)
    y = np.zeros(len(serial), bool)
    for g in rng.choice(gpus, failures, replace=False):
        y[g * 10 + 5:g * 10 + 10] = True
    noise = rng.random(len(y))
    evidence = noise + 0.2 * y
    risk = noise + 2.0 * y if better else evidence.copy()
    test = pd.DataFrame({"serial": serial, "label": y})
    metrics = {"model": {"pr_auc": average_precision_score(y, risk), "failures": failures},
               "baseline": {"pr_auc": average_precision_score(y, evidence)}}
    start = date(2025, 3, 1)
    fold_list = [model.Fold((start, start + timedelta(days=20)), (start + timedelta(days=28 + 14 * j),
                                                                  start + timedelta(days=41 + 14 * j)))
                 for j in range(folds)]
    return CrossValidation(fold_list, test, risk, risk, evidence, {}, metrics, [])


def test_a_clearly_better_model_at_the_edge_of_the_bar_is_promoted():
    promoted, reason = promotion(_pool(3, 15, better=True), P)
    assert promoted, reason
    assert "over 3 time-ordered folds, 15 failures" in reason and "wins in 100% of 200 resamples" in reason


def test_one_fold_short_refuses_even_a_clearly_better_model():
    """Round 10's wrong promotion had 2 folds: resampling GPUs cannot replicate over time."""
    cv = _pool(2, 40, better=True)
    promoted, reason = promotion(cv, P)
    assert not promoted and reason.endswith("(need 3 folds to judge a model over time)")
    bar = promotion_bar(cv, P)
    assert [c.met for c in bar] == [False, True]  # the PR-AUCs and resamples were not judged
    assert promotion(cv, replace(P, promotion_min_folds=2))[0]


def test_one_failure_short_refuses_even_a_clearly_better_model():
    cv = _pool(4, 14, better=True)
    promoted, reason = promotion(cv, P)
    assert not promoted and reason.endswith("(need 15 failures to judge a model)")
    assert [c.check for c in promotion_bar(cv, P)] == ["time-ordered folds", "failed GPUs in the folds"]
    assert promotion(cv, replace(P, promotion_min_failures=14))[0]
    # predict.min_failures still applies when it is the larger
    assert "(need 25 failures" in promotion(_pool(4, 24, better=True), replace(P, min_failures=25))[1]


def test_a_model_no_better_than_the_evidence_score_is_refused_however_much_data():
    cv = _pool(4, 60, better=False)
    promoted, reason = promotion(cv, P)
    assert not promoted and reason.endswith("(the model does not beat it)")
    assert [c.met for c in promotion_bar(cv, P)] == [True, True, False]


def test_a_model_ahead_on_the_pool_but_not_in_most_resamples_is_refused():
    """Ahead on the pooled PR-AUC through one failed GPU alone: resamples without that GPU
    are ties, which the model does not win, so the resamples refuse it, and the reason says
    how many it won."""
    cv = _pool(4, 30, better=False, seed=3)
    y = cv.test["label"].to_numpy()
    one = cv.test["serial"].to_numpy() == cv.test.loc[y, "serial"].iloc[0]
    ahead = cv.evidence_risk + 0.5 * (one & y)
    auc = average_precision_score(y, ahead)
    assert auc > cv.metrics["baseline"]["pr_auc"]
    cv = replace(cv, risk=ahead, raw=ahead, metrics={**cv.metrics, "model": {"pr_auc": auc, "failures": 30}})
    promoted, reason = promotion(cv, P)
    bar = promotion_bar(cv, P)
    assert not promoted and len(bar) == 4 and bar[2].met and not bar[3].met
    assert 0.4 < bar[3].value < 0.8  # a GPU is in about 63% of resamples of 300
    assert f"it wins in {bar[3].value:.0%} of 200 resamples of the GPUs (need 90%)" in reason


def test_the_model_card_shows_each_check_of_the_bar():
    cv = _pool(2, 7, better=True)
    bar = promotion_bar(cv, P)
    promoted, reason = promotion(cv, P)
    card = {"version": "predict-x", "horizon_days": 7, "trained_at": "2026-12-02T11:00:00", "promoted": promoted,
            "reason": reason, "promotion_bar": [c.__dict__ for c in bar], "split": {}, "train_rows": 1,
            "train_failures": 1, "calibration": {}, "features": []}
    text = model.card_markdown(card)
    assert "| time-ordered folds | 2 | >= 3 | **no** |" in text
    assert "| failed GPUs in the folds | 7 | >= 15 | **no** |" in text
    assert "Promoted: False (" in text and "need 3 folds" in text


def _bar_bench():
    spec = importlib.util.spec_from_file_location("bench_predict_bar", ROOT / "bench" / "bench_predict_bar.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_null_simulation_s_resampled_pr_auc_is_sklearn_s():
    bench = _bar_bench()
    rng = np.random.default_rng(2)
    gpu, y, latent = bench.draw_period(rng, 120, 20, 6, 7, 4.0)
    score = bench.ranker(rng, gpu, latent, 1.0)
    weights = np.vstack([np.ones(120), rng.multinomial(120, np.full(120, 1 / 120), size=20)])
    fast = bench.ap_resampled(gpu, y, score, weights)
    slow = [average_precision_score(y, score, sample_weight=w[gpu]) if (w[gpu] * y).any() else np.nan for w in weights]
    assert np.allclose(fast, slow, equal_nan=True)
    assert y.sum() > 6  # several positive days per failed GPU: the GPUs are the clusters


@pytest.mark.parametrize("better", [True, False])
def test_the_null_simulation_promotes_a_clearly_better_ranker_and_rarely_an_equal_one(better):
    bench = _bar_bench()
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(20):
        gpu, y, latent = bench.draw_period(rng, 200, 14, 20, 7, 4.0)
        inc = bench.ranker(rng, gpu, latent, 1.0)
        hits += bench.promotes(rng, gpu, y, bench.ranker(rng, gpu, latent, 0.1 if better else 1.0), inc, 100, 0.9)
    assert hits >= 17 if better else hits <= 6
