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
