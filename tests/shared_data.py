"""Where the shared reference data lives: ``../shared`` beside the repository root, on any machine.

The one helper tests (through :func:`shared_case`, re-exported by conftest.py) and benchmarks (through
:func:`benchmark_file`) use to find the MATPOWER, PGLib and PowerModels files of ``../shared/data``. Nothing
in the repository names a path of one machine (tests/test_machine_paths.py checks it).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"


def missing_reason(path: Path, checks: str) -> str:
    """Why a test or a benchmark cannot run: the file, where it was looked for, and what it would have checked."""
    return (f"reference data {path.relative_to(SHARED_DATA) if path.is_relative_to(SHARED_DATA) else path} not found "
            f"(expected at {path}: the MATPOWER/PGLib/PowerModels files of ../shared/data beside the repository root "
            f"{REPO_ROOT}); would have checked: {checks}")


def shared_case(*parts: str, checks: str) -> Path:
    """Path of a file in ../shared/data; skips the test when it is absent, saying which file is missing and
    what the test would have checked (``checks``), so the skip summary (``-rs``) reads as a to-do list."""
    import pytest

    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(missing_reason(path, checks))
    return path


def benchmark_file(*parts: str, checks: str) -> Path:
    """Path of a file in ../shared/data for a benchmark script; when it is absent the script says why and stops
    (exit status 0: a skipped measurement, not a failure)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        print(f"skipped: {missing_reason(path, checks)}", file=sys.stderr)
        raise SystemExit(0)
    return path
