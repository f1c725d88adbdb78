"""The session guard (conftest) sees every file a test leaves in a checkout: new, ignored
(``out/``, a warehouse), changed or removed; caches are not counted."""

import shutil
import subprocess

import pytest

from tests.repo_guard import changes, snapshot


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("/out/\n*.duckdb\n__pycache__/\n")
    (tmp_path / "tracked.py").write_text("x = 1\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.html").write_text("the user's report")
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=tmp_path, check=True)
    return tmp_path


def test_guard_names_what_a_test_left_behind(checkout):
    before = snapshot(checkout)
    assert "out/report.html" in before  # ignored files are watched too
    (checkout / "out" / "report.html").write_text("a 2-GPU fixture's report")
    (checkout / "fleetfault.duckdb").write_bytes(b"x")
    (checkout / "models").mkdir()
    (checkout / "models" / "m.pkl").write_bytes(b"m")
    (checkout / "tracked.py").write_text("x = 2\n")
    (checkout / "__pycache__").mkdir()
    (checkout / "__pycache__" / "a.pyc").write_bytes(b"c")
    assert changes(before, snapshot(checkout)) == [
        "fleetfault.duckdb (new)", "models/m.pkl (new)", "out/report.html (changed)", "tracked.py (changed)"]


def test_guard_is_quiet_when_nothing_changed_and_off_outside_git(checkout, tmp_path_factory):
    before = snapshot(checkout)
    assert changes(before, snapshot(checkout)) == []
    assert snapshot(tmp_path_factory.mktemp("not_a_checkout")) is None
