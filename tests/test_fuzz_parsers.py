"""The fuzz campaign's short version (``bench/fuzz_parsers.py`` runs 100,000 inputs a
parser): generated and mutated inputs, and raw bytes, through every parser; no exception
escapes and per file rows read = rows loaded + rows quarantined."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fuzz_parsers", ROOT / "bench" / "fuzz_parsers.py")
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_parsers"] = fuzz
_spec.loader.exec_module(fuzz)

SETTINGS = settings(max_examples=12, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Deliberate UsageErrors: a wholly unreadable inventory stops the night (exit 2); a ticket
#: export whose columns are not recognised too, until it is quarantined as unrecognised_layout.
ALLOWED = {"inventory": UsageError, "tickets": UsageError}


@pytest.fixture(scope="module")
def ctx():
    return fuzz._context()


@pytest.fixture(scope="module")
def corpora():
    return {p: fuzz.seeds(p) for p in fuzz.PARSERS}


def _parse(parser: str, path: Path, rng: random.Random, ctx: dict) -> None:
    try:
        fuzz.RUNNERS[parser](path, rng, ctx)  # raises Violation when counts do not reconcile
    except UsageError:
        if parser not in ALLOWED:
            raise


@pytest.mark.parametrize("parser", fuzz.PARSERS)
@SETTINGS
@given(index=st.integers(0, 10**9))
def test_mutated_inputs_never_raise_and_reconcile(tmp_path, ctx, corpora, parser, index):
    rng = random.Random(f"hypothesis:{parser}:{index}")
    suffix, data = fuzz.generate(parser, corpora[parser], rng)
    path = tmp_path / f"in{suffix}"
    path.write_bytes(data)
    _parse(parser, path, rng, ctx)


@pytest.mark.parametrize(("parser", "suffix"), [("smi", ".csv.gz"), ("kernel", ".log"), ("tickets", ".csv"),
                                                ("tickets", ".json"), ("inventory", ".csv")])
@SETTINGS
@given(data=st.binary(max_size=600))
def test_raw_bytes_never_raise_and_reconcile(tmp_path, ctx, parser, suffix, data):
    path = tmp_path / f"in{suffix}"
    path.write_bytes(data)
    _parse(parser, path, random.Random(0), ctx)


def test_the_generator_is_deterministic_and_varied(corpora):
    a = [fuzz.generate("smi", corpora["smi"], random.Random(f"0:smi:{i}")) for i in range(30)]
    b = [fuzz.generate("smi", corpora["smi"], random.Random(f"0:smi:{i}")) for i in range(30)]
    assert a == b  # input i of a campaign is replayable
    assert len({d for _, d in a}) == 30 and {s for s, _ in a} >= {".csv", ".csv.gz"}
