"""Nothing in the repository names a path of one machine: tests and benchmarks find ../shared from the repository
root (tests/shared_data.py) and skip with the path and the reason when it is absent (issue 25)."""

import re
import subprocess
from pathlib import Path

import pytest

from .shared_data import REPO_ROOT, SHARED, SHARED_DATA, missing_reason

# an absolute path under a home, work or root folder of one machine (Linux, macOS, Windows); "../work/x" is relative
MACHINE_PATH = re.compile(r"(?<![\w.~])(?:/(?:work|home|root|Users)/[\w.-]+|[A-Za-z]:\\\\?(?:Users|home)\\)")


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"{REPO_ROOT} is not a git checkout (no tracked files to scan)")
    return [REPO_ROOT / p for p in out.decode().split("\0") if p]


def test_no_tracked_file_names_a_machine_path():
    hits = []
    for path in _tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # binary data (npz, png, gz)
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            if MACHINE_PATH.search(line):
                hits.append(f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()[:120]}")
    assert hits == [], "absolute machine paths (use tests/shared_data.py):\n" + "\n".join(hits)


def test_the_pattern_finds_machine_paths_and_nothing_else():
    root = "/"  # the examples are spelled in pieces, so that this file holds no machine path itself
    for bad in (f'PGLIB = "{root}work/wt/shared/data/pglib"', f"{root}home/alice/data.m", f"# {root}root/x", "C:" + r'\Users\bob\case.m'):
        assert MACHINE_PATH.search(bad), bad
    for fine in ('"../work/r"', "~/work/x", "tests/work/x", "/tmp/x", "https://example.org/home/page"):
        assert not MACHINE_PATH.search(fine), fine


def test_shared_data_is_found_beside_the_repository_root():
    assert SHARED == REPO_ROOT.parent / "shared" and SHARED_DATA == SHARED / "data"
    assert (REPO_ROOT / "pyproject.toml").is_file()
    reason = missing_reason(SHARED_DATA / "pglib" / "nope.m", "the answer")
    assert str(SHARED_DATA / "pglib" / "nope.m") in reason and "pglib/nope.m not found" in reason and "the answer" in reason
