"""Exit codes a scheduler can trust: 0 all loaded, 1 input quarantined, 2 usage,
configuration or environment error, 3 internal error; stderr always gets one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = ("serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
             "S1,H100 80GB HBM3,OEM-A,h1,0,sha,B1,2024-01-01,\n")


def _data(root: Path) -> Path:
    data = root / "data"
    data.mkdir()
    (data / "inventory.csv").write_text(INVENTORY)
    return data


def _run(tmp_path, *args) -> int:
    return main(["run", "--warehouse", str(tmp_path / "w.duckdb"), "--out", str(tmp_path / "out"), "-q", *args])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_an_empty_or_wrong_data_folder_is_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert _run(tmp_path, "--data", str(tmp_path / "empty")) == 2
    line = _one_line(capsys)
    assert f"no input files under {tmp_path / 'empty'}: expected inventory.csv, telemetry/, kernel/, tickets/" in line
    wrong = tmp_path / "wrong" / "host-a"  # the telemetry folder given for the data folder
    wrong.mkdir(parents=True)
    (wrong / "smi.csv").write_text("timestamp, index\n")
    assert _run(tmp_path, "--data", str(tmp_path / "wrong")) == 2
    assert "it holds host-a/" in _one_line(capsys)
    assert _run(tmp_path, "--data", str(tmp_path / "missing")) == 2
    assert "no such folder" in _one_line(capsys)
    assert not (tmp_path / "w.duckdb").exists()  # nothing was started


def test_unwritable_out_or_warehouse_folder_is_exit_2(tmp_path, capsys):
    data = _data(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["run", "--data", str(data), "--out", str(blocker / "out"), "--warehouse", str(tmp_path / "w.duckdb"),
                 "-q"]) == 2
    assert "--out" in _one_line(capsys)
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "out"), "--warehouse", str(blocker / "w.duckdb"),
                 "-q"]) == 2
    assert "--warehouse" in _one_line(capsys)
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "out"), "--warehouse", str(tmp_path), "-q"]) == 2
    assert "is a folder" in _one_line(capsys)


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no file can be made in: mode 555, or, for root (who ignores modes), immutable."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:
        ro.chmod(0o555)
        yield ro
        ro.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode != 0:
        pytest.skip("running as root without chattr +i: no folder is read-only to root")
    try:
        yield ro
    finally:
        subprocess.run(["chattr", "-i", str(ro)], check=True)


def test_read_only_out_or_warehouse_folder_is_exit_2(tmp_path, capsys, read_only_folder):
    data = _data(tmp_path)
    assert main(["run", "--data", str(data), "--out", str(read_only_folder), "--warehouse", str(tmp_path / "w.duckdb"),
                 "-q"]) == 2
    assert f"--out: the folder {read_only_folder} is not writable" in _one_line(capsys)
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "out"), "--warehouse",
                 str(read_only_folder / "w.duckdb"), "-q"]) == 2
    assert f"the folder {read_only_folder} is not writable" in _one_line(capsys)


def test_usage_errors_are_one_line_not_a_box(capsys):
    assert main(["run", "--no-such-option"]) == 2
    line = _one_line(capsys)
    assert "No such option: --no-such-option" in line and "fleetfault run --help" in line
    assert main(["export"]) == 2
    assert "Missing argument" in _one_line(capsys)
    assert main(["frobnicate"]) == 2
    assert "No such command 'frobnicate'" in _one_line(capsys)


def test_an_internal_error_is_exit_3_with_a_log_of_the_details(tmp_path, capsys, monkeypatch):
    import pipeline.run

    def broken(ctx):
        raise ZeroDivisionError("a bug deep in a stage")

    monkeypatch.setattr(pipeline.run, "STAGES", [("inventory", "x:y")])
    monkeypatch.setattr(pipeline.run, "resolve_stage", lambda target: broken)
    assert _run(tmp_path, "--data", str(_data(tmp_path))) == 3
    line = _one_line(capsys)
    assert line.startswith("fleetfault: internal error: stage inventory failed (ZeroDivisionError: a bug deep")
    log = Path(line.rsplit("details in ", 1)[1])
    try:
        assert "Traceback" in log.read_text() and "a bug deep in a stage" in log.read_text()
    finally:
        log.unlink()


def test_a_second_run_on_a_busy_warehouse_is_exit_2(tmp_path, capsys):
    from pipeline.warehouse import Warehouse

    data, wh = _data(tmp_path), tmp_path / "w.duckdb"
    Warehouse(wh).close()
    # Another process holds the warehouse, as a run still going would.
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('open', flush=True); time.sleep(60)", str(wh)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        t0 = time.monotonic()
        assert _run(tmp_path, "--data", str(data)) == 2
        line = _one_line(capsys)
        assert f"warehouse {wh} is in use by process {holder.pid}" in line
        assert time.monotonic() - t0 < 30  # told at once, not after waiting
    finally:
        holder.kill()
        holder.wait()


def test_python_dash_m_pipeline_cli_runs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--data", str(tmp_path / "none")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "no such folder" in res.stderr


def test_command_modules_do_not_import_the_cli():
    """The cycle that broke ``python -m pipeline.cli``: cli imports the command modules."""
    import ast

    def imports_cli(path: Path) -> bool:  # any form, at the top or inside a function
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module == "pipeline.cli" or (
                    node.module == "pipeline" and any(a.name == "cli" for a in node.names))):
                return True
            if isinstance(node, ast.Import) and any(a.name == "pipeline.cli" for a in node.names):
                return True
        return False

    skip = {ROOT / "pipeline" / "cli.py", ROOT / "pipeline" / "__main__.py"}
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "pipeline").rglob("*.py") if p not in skip and imports_cli(p)]
    assert offenders == []
