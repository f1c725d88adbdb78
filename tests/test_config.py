import pytest

from pipeline.config import Config, config_from_dict, load_config
from pipeline.errors import ConfigError


def test_defaults_without_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config()
    assert cfg == Config()
    assert cfg.predict.horizon_days == 7


def test_repo_config_is_valid():
    from tests.conftest import ROOT

    cfg = load_config(ROOT / "fleetfault.toml")
    assert cfg.sites["sha"].tz == "Asia/Shanghai"


def test_config_is_frozen():
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.paths.data = "x"  # type: ignore[misc]


def test_engine_is_named_and_checked():
    assert Config().engine.name == "duckdb"
    with pytest.raises(ConfigError, match=r"engine.name: must be one of duckdb, spark, got 'oracle'"):
        config_from_dict({"engine": {"name": "oracle"}})
    with pytest.raises(ConfigError, match="engine.bogus"):
        config_from_dict({"engine": {"bogus": 1}})


def test_all_problems_reported_together():
    raw = {
        "paths": {"data": 3, "bogus": 1},
        "predict": {"horizon_days": "seven"},
        "sites": {"x": {"tz": "Mars/Olympus"}},
        "nonsense": {},
        "normalize": {"auto_threshold": 140},
    }
    with pytest.raises(ConfigError) as exc:
        config_from_dict(raw)
    text = str(exc.value)
    assert len(exc.value.problems) == 6
    for needle in ("paths.data", "paths.bogus", "predict.horizon_days", "Mars/Olympus", "nonsense", "auto_threshold"):
        assert needle in text


def test_bool_is_not_an_int():
    with pytest.raises(ConfigError, match="predict.horizon_days"):
        config_from_dict({"predict": {"horizon_days": True}})


def test_int_accepted_for_float_and_nested_points():
    cfg = config_from_dict({"stats": {"min_gpu_days": 10}, "tickets": {"points": {"sp1": {"columns": {"ticket_id": "工单号"}, "dayfirst": True}}}})
    assert cfg.stats.min_gpu_days == 10.0
    assert cfg.tickets.points["sp1"].columns["ticket_id"] == "工单号"


def test_bad_toml_and_missing_file(tmp_path):
    bad = tmp_path / "f.toml"
    bad.write_text("[paths\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.toml")


def test_values_a_stage_would_reject_are_found_at_load_all_together(tmp_path, capsys):
    from pipeline.cli import main

    bad = tmp_path / "late.toml"
    bad.write_text("""
[stats]
window_start = "2025-06-31"
afr_by = ["model", "modle", "month,quarter", "batch,batch"]
survival_by = ["quarter"]
compare_by = ["vendor,site,"]
failure_parts = []
[kernel.boot_times]
gpu-a01 = "last tuesday"
[telemetry]
fields = ["timestamp", "gpu_name", "name"]
[telemetry.host_fields]
"dgx-*" = ["index", "memory.used [MiB]"]
[tickets.points.sp1]
encoding = "gbk2"
date_format = "YYYY-MM-DD"
[predict]
train_days = 0
[collect]
interval_s = -1
""")
    assert main(["run", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "14 problem(s)" in err
    for needle in ("stats.window_start: '2025-06-31'", "'modle': unknown column", "'month,quarter': one time period",
                   "'batch,batch': a column named twice", "stats.survival_by: 'quarter'", "stats.compare_by",
                   "stats.failure_parts", "kernel.boot_times.gpu-a01", "name named more than once",
                   "dgx-*: no 'timestamp'", "unknown encoding 'gbk2'", "no strftime directive",
                   "predict.train_days: must be at least 1", "collect.interval_s: must be positive"):
        assert needle in err, needle


def test_a_window_that_ends_before_it_starts_is_refused():
    with pytest.raises(ConfigError, match="window_end .2025-01-01. is before"):
        config_from_dict({"stats": {"window_start": "2025-02-01", "window_end": "2025-01-01"}})
    assert config_from_dict({"stats": {"window_start": "2025-01-01", "window_end": "2025-01-01"}})


def test_good_values_load_as_given():
    cfg = config_from_dict({
        "stats": {"afr_by": ["model,quarter", "site"], "survival_by": ["vendor"]},
        "kernel": {"boot_times": {"h1": "2025-03-04T06:00:00+08:00", "h2": "2025-03-04 06:00"}},
        "telemetry": {"fields": ["timestamp", "index", "gpu_name", "temperature.gpu"]},
        "tickets": {"points": {"sp1": {"encoding": "GB18030", "date_format": "%Y/%m/%d"}}},
    })
    assert cfg.stats.afr_by == ("model,quarter", "site") and cfg.kernel.boot_times["h2"] == "2025-03-04 06:00"


@pytest.mark.parametrize("build", [
    lambda: Config(),
    lambda: config_from_dict({"sites": {"sha": {"service_points": ["sp1"]}}, "link": {"slot_base": {"sp1": 1}},
                              "telemetry": {"host_fields": {"h*": ["timestamp", "index"]}}}),
    lambda: __import__("dataclasses").replace(Config(), sites={"x": {"service_points": ["a"]}}),
])
def test_nothing_inside_the_config_can_change(build):
    cfg = build()
    for mutate in (
        lambda: cfg.stats.failure_parts.append("FAN"),
        lambda: cfg.sites.__setitem__("new", None),
        lambda: cfg.link.slot_base.__setitem__("sp9", 0),
        lambda: cfg.tickets.points.__setitem__("p", None),
        lambda: cfg.telemetry.host_fields.__setitem__("h", ()),
        lambda: cfg.kernel.boot_times.__setitem__("h", "2025-01-01"),
        lambda: setattr(cfg.stats, "afr_by", ()),
    ):
        with pytest.raises((AttributeError, TypeError)):
            mutate()
    for site in cfg.sites.values():
        with pytest.raises((AttributeError, TypeError)):
            site["service_points"].append("b") if isinstance(site, dict) else site.service_points.append("b")
    for fields in cfg.telemetry.host_fields.values():
        assert isinstance(fields, tuple)


def test_a_section_declared_with_plain_lists_and_dicts_is_frozen_inside_the_config():
    """Sections other code adds (``[engine]``) may declare ``list``/``dict``: still immutable."""
    import dataclasses

    from pipeline import config as config_module

    @dataclasses.dataclass(frozen=True)
    class Extra:
        options: dict[str, str] = dataclasses.field(default_factory=dict)
        names: list[str] = dataclasses.field(default_factory=list)

    built = config_module._convert(Extra, {"options": {"a": "1"}, "names": ["x"]}, "extra", problems := [])
    assert problems == []
    config_module._freeze(built)
    with pytest.raises(TypeError):
        built.options["b"] = "2"
    assert built.names == ("x",)
