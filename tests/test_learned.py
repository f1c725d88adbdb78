"""The learned layer (pipeline/normalize/learned.py): it fills only what the rules left to
review, only at the precision it is asked for, codes nothing on too little data, is
deterministic, learns from reviewed answers, and is off when the config says so.

The synthetic sets below are matcher-free: made-up words stand for the vocabulary a site
uses, so these tests do not move when the rules change.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from pipeline.normalize import learned

SEED = 20261201
STEMS = {"OVERHEAT": ["zorbic", "glimmet"], "HANG": ["quandle", "sproing"], "FAN_FAULT": ["flimmer", "whirrup"],
         "POWER_FAULT": ["brastic", "voltrix"]}
REVIEWERS_ONLY = {"voltrix"}  # a site's word the rules never code: only people do
NOISE = ["unit", "node", "rack", "seen", "again", "since", "morning", "pls", "check", "after", "job"]
START = datetime(2025, 1, 1)


def canon(text: str | None) -> str:
    return " ".join((text or "").lower().split())


def synthetic(n: int, seed: int = SEED, reviewed_share: float = 0.5, vague_share: float = 0.15):
    """Tickets with symptom codes (the rules code a ticket when it says ``code:``, never one
    naming a word of :data:`REVIEWERS_ONLY`) and their gold codes.

    A ``vague`` ticket holds only shared words and a random gold code: nothing can be right
    about it more than a quarter of the time, which is the trap for a careless layer.
    """
    rng = np.random.default_rng(seed)
    codes = list(STEMS)
    rows, gold = [], []
    for i in range(n):
        code = codes[int(rng.integers(len(codes)))]
        words = list(rng.choice(NOISE, size=3, replace=False))
        if rng.random() < vague_share:
            text, rule = " ".join(words) + f" {int(rng.integers(1000))}", None
        else:
            stem = STEMS[code][int(rng.integers(2))]
            only_reviewers = stem in REVIEWERS_ONLY
            # a typo in one letter now and then, so texts vary beyond the number
            if rng.random() < 0.3:
                j = int(rng.integers(1, len(stem)))
                stem = stem[:j] + stem[j + 1:]
            words.insert(int(rng.integers(4)), stem)
            text = " ".join(words) + f" {int(rng.integers(1000))}"
            rule = None if rng.random() < reviewed_share or only_reviewers else code
            if rule:
                text = f"code: {text}"
        rows.append({"service_point": "sp", "ticket_id": f"T{i:05d}", "opened_at": START + timedelta(hours=i),
                     "part_text": "gpu", "symptom_text": text, "action_text": "reboot",
                     "part_code": "GPU", "part_score": 100.0, "symptom_code": rule,
                     "symptom_score": 100.0 if rule else 40.0, "action_code": "REBOOT", "action_score": 100.0})
        gold.append(code)
    tickets = pl.DataFrame(rows).with_columns(pl.lit(False).alias("review"))
    tickets = tickets.with_columns(pl.col("symptom_code").is_null().alias("review"))
    return tickets, gold


def is_vague(text: str) -> bool:
    return all(w in NOISE or w.isdigit() for w in text.split())


def answers_for(tickets: pl.DataFrame, gold: list[str]) -> list[tuple[str, str, str]]:
    return [("symptom", t, g) for t, c, g in zip(tickets["symptom_text"], tickets["symptom_code"], gold) if c is None]


@functools.lru_cache(maxsize=None)  # several tests look at the same run; training takes seconds
def train_past_fill_future(n: int, target: float, seed: int = SEED):
    tickets, gold = synthetic(n, seed)
    half = n // 2
    past, future = tickets.head(half), tickets.tail(n - half)
    layer = learned.train(learned.examples(past, answers_for(past, gold[:half]), canon), target)
    filled, rows = learned.fill(future, layer, canon)
    return layer, filled, rows, gold[half:]


@pytest.mark.parametrize("target", [0.9, 0.97])
def test_codes_it_writes_are_right_at_least_as_often_as_the_target(target):
    print(f"seed {SEED}")
    layer, filled, rows, gold = train_past_fill_future(1200, target)
    assert layer.models["symptom"].active, layer.models["symptom"].reason
    by_id = dict(zip(filled["ticket_id"], gold))
    right = sum(by_id[t] == c for t, c in zip(rows["ticket_id"], rows["code"]))
    assert rows.height >= 100  # it does code: a layer that never fills would pass trivially
    assert right / rows.height >= target
    # vague tickets (random gold, right a quarter of the time) are where errors come from:
    # the layer may code a few of them only within its error budget
    texts = dict(zip(filled["ticket_id"], filled["symptom_text"]))
    vague = [t for t in rows["ticket_id"] if is_vague(texts[t])]
    print(f"target {target}: {rows.height} filled, precision {right / rows.height:.3f}, {len(vague)} vague")
    assert len(vague) < rows.height / 2


def test_it_fills_only_empty_codes_and_marks_them():
    layer, filled, rows, _ = train_past_fill_future(1200, 0.9)
    tickets, _ = synthetic(1200)
    future = tickets.tail(600)
    was = dict(zip(future["ticket_id"], future["symptom_code"]))
    assert all(was[t] is None for t in rows["ticket_id"])  # never overwrites a rule's code
    kept = filled.filter(pl.col("ticket_id").is_in(rows["ticket_id"].implode()).not_())
    assert kept["symptom_code"].to_list() == [was[t] for t in kept["ticket_id"]]
    m = layer.models["symptom"]
    assert set(rows["score"]) == {m.score} and 90 <= m.score < 100  # the layer's own score, not 100
    assert (rows["probability"] >= m.threshold).all()
    coded = filled.filter(pl.col("ticket_id").is_in(rows["ticket_id"].implode()))
    assert (coded["symptom_score"] == m.score).all()
    assert filled["review"].to_list() == filled["symptom_code"].is_null().to_list()


def test_too_little_reviewed_data_codes_nothing_and_says_so():
    tickets, gold = synthetic(60)
    layer = learned.train(learned.examples(tickets, answers_for(tickets, gold)[:10], canon), 0.99)
    m = layer.models["symptom"]
    assert not m.active and "too little data" in m.reason
    assert "too little data" in layer.summary()
    filled, rows = learned.fill(tickets, layer, canon)
    assert rows.height == 0 and filled["symptom_code"].to_list() == tickets["symptom_code"].to_list()


def test_an_unreachable_target_codes_nothing():
    # 300 held-out texts all right bound precision at 0.990 (95%): 0.999 cannot be claimed
    layer, _, rows, _ = train_past_fill_future(600, 0.999)
    assert rows.height == 0 and "never reaches" in layer.models["symptom"].reason


def test_training_and_filling_are_deterministic():
    tickets, gold = synthetic(600)
    runs = []
    for _ in range(2):
        layer = learned.train(learned.examples(tickets, answers_for(tickets, gold), canon), 0.9)
        runs.append((layer, *learned.fill(tickets, layer, canon)))
    (a, fa, ra), (b, fb, rb) = runs
    assert a.models["symptom"].active
    assert a.fingerprint == b.fingerprint and a.models["symptom"].threshold == b.models["symptom"].threshold
    assert fa.equals(fb) and ra.equals(rb) and ra.height > 0


def test_reviewed_answers_teach_a_near_variant_the_rules_never_coded():
    """A word only reviewers ever coded ("voltrix" -> POWER_FAULT in the answers, never by a
    rule) codes a new spelling of it in new surroundings."""
    tickets, _ = synthetic(1200)
    past = tickets.head(600)  # what train_past_fill_future trained on
    assert not any("voltrix" in t for t, c in zip(past["symptom_text"], past["symptom_code"]) if c)
    assert any("voltrix" in t for t in past["symptom_text"])
    layer = train_past_fill_future(1200, 0.9)[0]
    new = tickets.head(1).with_columns(pl.lit("VOLTRIXX again on node seven").alias("symptom_text"),
                                       pl.lit(None, pl.Utf8).alias("symptom_code"), pl.lit("X1").alias("ticket_id"))
    filled, rows = learned.fill(new, layer, canon)
    assert filled["symptom_code"].to_list() == ["POWER_FAULT"] and rows.height == 1


def test_reviewed_answers_outweigh_the_rules_as_labels():
    tickets, _ = synthetic(40)
    text = tickets["symptom_text"][0]
    data = learned.examples(tickets.with_columns(pl.lit("HANG").alias("symptom_code")),
                            [("symptom", text.upper(), "OVERHEAT")], canon)["symptom"]
    row = data[data["own"] == canon(text)].iloc[0]
    assert row["label"] == "OVERHEAT" and row["reviewed"] and row["weight"] == learned.REVIEWED_WEIGHT
    assert (data.loc[~data["reviewed"], "weight"] == 1.0).all()


def test_heldout_never_trains_on_the_text_it_evaluates(monkeypatch):
    tickets, gold = synthetic(400)
    data = learned.examples(tickets, answers_for(tickets, gold), canon)["symptom"]
    seen = []
    real_fit = learned._fit

    def spy(frame):
        seen.append(set(frame["own"]))
        return real_fit(frame)

    calls = []
    real_predict = learned.predict

    def spy_predict(est, frame):
        calls.append((len(seen), set(frame["own"])))
        return real_predict(est, frame)

    monkeypatch.setattr(learned, "_fit", spy)
    monkeypatch.setattr(learned, "predict", spy_predict)
    learned.heldout(data)
    assert calls
    for k, evaluated in calls:
        assert not (seen[k - 1] & evaluated)


# -- the hook in the normalize stage -------------------------------------------------------

@pytest.fixture
def stage_wh(tmp_path, monkeypatch):
    """Build a warehouse whose tickets_raw holds a synthetic set, with its reviewed answers
    stored and the stage's matcher replaced by the synthetic set's rules."""
    from pipeline.normalize import stage
    from pipeline.warehouse import Warehouse

    opened = []

    def make(n: int):
        tickets, gold = synthetic(n)
        rules = dict(zip(tickets["symptom_text"], tickets["symptom_code"]))

        class Rules:  # codes what the synthetic rules coded; answers are the layer's business here
            def suggest(self, dimension, text, k=3):
                return []

            def code_frame(self, df):
                sym = pl.col("symptom_text").replace_strict(rules, default=None, return_dtype=pl.Utf8)
                return df.with_columns(pl.lit("GPU").alias("part_code"), pl.lit(100.0).alias("part_score"),
                                       sym.alias("symptom_code"),
                                       pl.when(sym.is_null()).then(40.0).otherwise(100.0).alias("symptom_score"),
                                       pl.lit("REBOOT").alias("action_code"), pl.lit(100.0).alias("action_score"),
                                       sym.is_null().alias("review"))

        monkeypatch.setattr(stage, "load_matcher", lambda cfg, learned=None: Rules())
        monkeypatch.setattr(stage, "canonical_key", canon)
        wh = Warehouse(tmp_path / "wh.duckdb")
        opened.append(wh)
        raw = tickets.select("service_point", "ticket_id", "opened_at", "part_text", "symptom_text", "action_text")
        wh.insert("tickets_raw", raw.with_columns(
            pl.lit("sp/a.csv").alias("source_file"), pl.lit(1, pl.Int64).alias("file_id"),
            pl.int_range(1, n + 1).cast(pl.Int64).alias("line_no")))
        wh.insert("review_answers", pl.DataFrame(
            [(d, t, canon(t), c, "test", datetime(2025, 6, 1)) for d, t, c in answers_for(tickets, gold)],
            schema={"dimension": pl.Utf8, "text": pl.Utf8, "canonical": pl.Utf8, "code": pl.Utf8,
                    "source_file": pl.Utf8, "imported_at": pl.Datetime("us")}, orient="row"))
        return wh

    yield make
    for wh in opened:
        wh.close()


def test_the_stage_hook_is_off_when_the_config_says_so(tmp_path, monkeypatch, stage_wh):
    from pipeline.config import config_from_dict
    from pipeline.normalize import stage

    called = []

    def refuse(*args, **kwargs):
        called.append(1)
        raise RuntimeError("learned layer called")

    monkeypatch.setattr(learned, "apply", refuse)
    wh = stage_wh(60)
    n, waiting = stage.recode(wh, config_from_dict({"normalize": {"learned": False}}))
    assert called == [] and n == 60 and waiting > 0
    assert wh.engine.scalar("SELECT count(*) FROM learned_codes", step="test") == 0
    assert not (tmp_path / "models").exists()
    with pytest.raises(RuntimeError):
        stage.recode(wh, config_from_dict({}))  # on by default
    assert called == [1]


def test_the_stage_fills_marks_persists_and_reuses_the_model(tmp_path, monkeypatch, stage_wh):
    from pipeline.config import config_from_dict
    from pipeline.normalize import review, stage

    cfg = config_from_dict({"normalize": {"learned_precision": 0.9}})
    wh = stage_wh(1200)
    notes: list[str] = []
    stage.recode(wh, cfg, notes)  # trains; the second recode below reuses the stored model
    n_learned = wh.engine.scalar("SELECT count(*) FROM learned_codes", step="test")
    assert n_learned > 0 and "learned layer filled" in notes[0] and f"symptom {n_learned}" in notes[0]
    card = tmp_path / "models" / learned.MODEL_DIR / "card.json"
    assert card.exists() and (card.parent / "symptom.skops").exists()
    agree = wh.engine.scalar("""SELECT count(*) FROM learned_codes l JOIN tickets_coded t USING (service_point, ticket_id)
                         WHERE l.dimension = 'symptom' AND t.symptom_code = l.code AND t.symptom_score = l.score""", step="test")
    assert agree == n_learned
    monkeypatch.setattr(learned, "train", lambda *a, **k: pytest.fail("retrained on an unchanged training set"))
    stage.recode(wh, cfg)
    assert wh.engine.scalar("SELECT count(*) FROM learned_codes", step="test") == n_learned
    # the review export lists the layer's codes for a person to confirm, its code first
    todo = review.pending(wh).filter(pl.col("learned_code").is_not_null())
    assert todo.height > 0 and set(todo["dimension"]) == {"symptom"}
    n = review.export_review(wh, cfg, tmp_path / "review.csv")
    sheet = pl.read_csv(tmp_path / "review.csv", infer_schema=False)
    assert sheet.height == n >= todo.height
    shown = dict(zip(sheet["text"], sheet["suggestion_1"]))
    assert all(shown[t] == c for t, c in zip(todo["text"], todo["learned_code"]))


def test_the_normalize_command_uses_the_stored_layer(tmp_path, stage_wh, cli):
    from pipeline.config import config_from_dict
    from pipeline.normalize import stage

    wh = stage_wh(1200)
    stage.recode(wh, config_from_dict({"normalize": {"learned_precision": 0.9}}))
    wh.close()
    point = tmp_path / "sp"
    point.mkdir()
    (point / "new.csv").write_text("Ticket ID,Opened,Part,Problem Description,Resolution\n"
                                   "N-1,2025-07-01 10:00,gpu,VOLTRIXX again on node seven,reboot\n")
    toml = tmp_path / "ff.toml"
    for target, want in ((0.9, "POWER_FAULT"), (0.99, "")):  # a layer stored for another target: unused
        toml.write_text(f"[normalize]\nlearned_precision = {target}\n")
        out = tmp_path / f"coded_{target}.csv"
        assert cli("normalize", point / "new.csv", "-o", out, "--warehouse", tmp_path / "wh.duckdb",
                   "--config", toml) == 0
        got = pl.read_csv(out, infer_schema=False)
        assert (got["symptom_code"].fill_null("").to_list(), got["review"].to_list()) == ([want], [str(not want).lower()])


@pytest.mark.parametrize("value", [1.0, 0.3, "high"])
def test_a_bad_precision_target_is_a_config_error(value):
    from pipeline.config import config_from_dict
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="normalize.learned_precision"):
        config_from_dict({"normalize": {"learned_precision": value}})

