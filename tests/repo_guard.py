"""What the test suite changed in the checkout: tests must write only under tmp_path.

A test that ran ``fleetfault run`` without ``--out`` once replaced a user's ``out/report.html``
and ``out/fleetfault.prom`` with a 2-GPU fixture. The conftest takes a snapshot of every
untracked, ignored or modified file of the checkout before the session and compares after it;
anything new, changed or gone fails the suite, named.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

#: Caches that Python, pytest and hypothesis keep beside the code: theirs, not the tests' outputs.
NOISE = ("__pycache__/", ".pytest_cache/", ".hypothesis/", ".venv/", ".ci-venv/", ".egg-info/")


def snapshot(root: Path) -> dict[str, tuple[str, int, int]] | None:
    """path -> (git status, size, mtime in ns) of every file git does not hold unchanged;
    None when ``root`` is not a git checkout (an unpacked sdist) or git is missing."""
    try:
        res = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all"],
                             cwd=root, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    state = {}
    for entry in res.stdout.decode("utf-8", "surrogateescape").split("\0"):
        path = entry[3:]
        if not path or entry[:2].strip() == "D" or any(n in "/" + path for n in NOISE) or path.endswith(".pyc"):
            continue
        try:
            st = (root / path).stat()
        except OSError:
            continue
        state[path] = (entry[:2], st.st_size, st.st_mtime_ns)
    return state


def changes(before: dict[str, tuple[str, int, int]], after: dict[str, tuple[str, int, int]]) -> list[str]:
    """``path (new|changed|removed)`` for each difference, sorted (a tracked file that
    became modified is changed, not new)."""
    out = [f"{p} ({'changed' if 'M' in after[p][0] else 'new'})" for p in after.keys() - before.keys()]
    out += [f"{p} (changed)" for p in after.keys() & before.keys() if after[p] != before[p]]
    out += [f"{p} (removed)" for p in before.keys() - after.keys()]
    return sorted(out)
