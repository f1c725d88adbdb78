"""The shipped alerting rules and Grafana dashboard: promtool validates and unit-tests the
rules; every query names only metrics the textfiles really contain."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from prom_tools import DASHBOARD, NODE_METRICS, RULE_TESTS, RULES, binary, metric_names, textfiles


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> set[str]:
    files = textfiles(tmp_path_factory.mktemp("prom") / "out")
    assert set(files) == {"fleetfault.prom", "fleetfault_run.prom"}
    return set().union(*files.values())


def _dashboard_targets() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def test_metric_names_parser():
    assert metric_names('topk(10, fleetfault_gpu_failure_risk{host=~"$host", model="a b"})') == {"fleetfault_gpu_failure_risk"}
    assert metric_names("sum by (kind, xid) (x_total{window=\"7d\"}) / on(instance) group_left y") == {"x_total", "y"}
    assert metric_names("time() - fleetfault_export_timestamp_seconds > 26 * 3600") == {"fleetfault_export_timestamp_seconds"}
    assert metric_names("rate(a[5m]) and absent(b) or vector(0)") == {"a", "b"}


def test_dashboard_queries_name_exported_metrics(exported):
    dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    targets = _dashboard_targets()
    assert len(targets) >= 8
    for title, expr in targets:
        names = metric_names(expr)
        assert names, f"{title}: no metric in {expr!r}"
        assert names <= exported, f"{title}: {sorted(names - exported)} not in the textfiles ({expr!r})"
    for var in dash["templating"]["list"]:
        assert metric_names(var["query"]["query"].replace("label_values(", "(").replace(", host)", ")")
                            .replace(", model)", ")")) <= exported
    used = set().union(*(metric_names(e) for _, e in targets))
    assert {"fleetfault_gpu_failure_risk", "fleetfault_gpu_xid_events", "fleetfault_run_last_exit_code",
            "fleetfault_export_timestamp_seconds"} <= used


def test_rules_name_exported_metrics(exported):
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {"FleetfaultGpuFailureRiskHigh", "FleetfaultTextfileStale", "FleetfaultNightlyRunFailed"} <= names
    for r in rules:
        assert metric_names(r["expr"]) <= exported | NODE_METRICS, r["alert"]
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    series = {s["series"].split("{")[0] for t in tests for s in t["input_series"]}
    assert series <= exported | NODE_METRICS  # the unit tests feed the metrics that exist
    tested = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    assert tested == names  # every alert is shown to fire in a unit test


def test_promtool_checks_and_unit_tests_the_rules():
    promtool = binary("promtool")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "SUCCESS" in run.stdout, run.stdout + run.stderr


def test_promtool_rejects_a_broken_expectation(tmp_path):
    """The unit tests can fail: the same file with one expected summary changed does."""
    promtool = binary("promtool")
    text = RULE_TESTS.read_text(encoding="utf-8").replace("with exit code 3", "with exit code 4")
    (tmp_path / RULES.name).write_text(RULES.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "t.yml").write_text(text, encoding="utf-8")
    run = subprocess.run([promtool, "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "FleetfaultNightlyRunFailed" in run.stdout + run.stderr
