"""data/sample regenerates byte for byte from the command recorded in its README.

XLSX files are byte-identical too: the simulator fixes the workbook's document dates and the
zip entries' timestamps (pipeline/simulate/tickets.py), so every file is compared as bytes.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer
from typer.testing import CliRunner

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def recorded_command() -> list[str]:
    text = (SAMPLE / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^fleetfault (simulate .*)$", text, re.M)
    assert m, "data/sample/README.md must record the `fleetfault simulate ...` command"
    return shlex.split(m.group(1))


def test_sample_regenerates_byte_identically(tmp_path):
    from pipeline.simulate.commands import register

    args = recorded_command()
    out_at = args.index("--out")
    assert args[out_at + 1] == "data/sample"
    args[out_at + 1] = str(tmp_path / "sample")
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # keep `simulate` a subcommand, as in the real CLI
    result = CliRunner().invoke(app, args + ["--quiet"])
    assert result.exit_code == 0, result.output
    made = tmp_path / "sample"
    want = sorted(p.relative_to(SAMPLE) for p in SAMPLE.rglob("*") if p.is_file() and p.name != "README.md")
    got = sorted(p.relative_to(made) for p in made.rglob("*") if p.is_file())
    assert got == want
    for rel in want:
        assert (made / rel).read_bytes() == (SAMPLE / rel).read_bytes(), f"{rel} differs from data/sample"
