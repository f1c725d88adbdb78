"""Helpers for the Prometheus and Grafana tests: the system binaries (skip or fail where they
are missing), PromQL metric names, and a real pair of fleetfault textfiles."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "fleetfault-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "fleetfault-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "fleetfault-dashboard.json"

#: node_exporter's own metrics that the rules may use besides fleetfault's.
NODE_METRICS = {"node_textfile_scrape_error", "node_textfile_mtime_seconds"}


def required() -> bool:
    """CI (CI=true) and FLEETFAULT_REQUIRE_PROMETHEUS=1 turn a missing binary into a failure."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("FLEETFAULT_REQUIRE_PROMETHEUS") == "1"


def binary(*names: str) -> str:
    """The first of ``names`` on PATH; else skip (or fail where required) with the reason."""
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    reason = (f"{' / '.join(names)} not installed (Debian: apt-get install prometheus "
              "prometheus-node-exporter; .ci/run installs them)")
    if required():
        pytest.fail(f"required by CI / FLEETFAULT_REQUIRE_PROMETHEUS=1: {reason}")
    pytest.skip(reason)


_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "inf", "nan", "time", "vector"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (labels, functions, keywords, template
    variables and durations removed)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # string literals
    s = re.sub(r"\$\{?\w+\}?", "", s)                        # Grafana variables
    s = re.sub(r"\{[^}]*\}", "", s)                          # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)                         # range selectors
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)  # label lists
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", s):
        if m.group(2) or m.group(1) in _KEYWORDS:
            continue
        names.add(m.group(1))
    return names


def textfiles(out: Path) -> dict[str, set[str]]:
    """Write a real ``fleetfault.prom`` (from the report's test fleet) and ``fleetfault_run.prom``
    into ``out``; returns file name -> the metric names in it that have samples."""
    from prometheus_client.parser import text_string_to_metric_families

    from pipeline.report.prometheus import write_textfile
    from pipeline.report.run_status import RunRecord, write_status
    from pipeline.warehouse import Warehouse
    from test_report import fill_warehouse

    with Warehouse(out.parent / "prom-wh.duckdb") as wh:
        fill_warehouse(wh)
        write_textfile(wh, out / "fleetfault.prom")  # what the report stage writes
    now = time.time()
    write_status(out, RunRecord(now - 120, now, 1, rows_quarantined=1))
    return {p.name: {f.name for f in text_string_to_metric_families(p.read_text()) if f.samples}
            for p in sorted(out.glob("*.prom"))}
