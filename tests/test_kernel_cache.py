"""numba's cache of powerdp's kernels lives in the user's cache folder, not in the installed package (a leftover cache
there shadowed an editable install after ``pip install .``: powerdp.files.kernel_cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import powerdp
from powerdp.files.kernel_cache import in_kernel_cache

PACKAGE = Path(powerdp.__file__).resolve().parent
# where each module's cached kernels go, from their dispatchers (decorated only: nothing is compiled)
PROBE = """
import json, sys
import numba
import powerdp.opf._active_set_kernel as k, powerdp.opf._active_set_newton as n, powerdp.privacy.discrete_kernels as d
from numba.core import config
@numba.njit(cache=True)
def mine(x):
    return x
print(json.dumps({"kernel": k.working_set_solve._cache._cache_path, "newton": n.newton_qp._cache._cache_path,
                  "sampler": d.fill_laplace._cache._cache_path, "mine": mine._cache._cache_path,
                  "config": config.CACHE_DIR}))
"""


def _probe(tmp_path: Path, **env: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    clean = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    out = subprocess.run([sys.executable, str(script)], env={**clean, **env}, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_kernels_are_cached_in_the_users_cache_not_in_the_package(tmp_path):
    paths = _probe(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))
    folder = (tmp_path / "cache" / "powerdp" / "numba").resolve()
    for name in ("kernel", "newton", "sampler"):
        where = Path(paths[name]).resolve()
        assert where.is_relative_to(folder), (name, where)
        assert not where.is_relative_to(PACKAGE), (name, where)
    # a user's own cached function keeps numba's default (next to its source), and numba's setting is as it was
    assert Path(paths["mine"]).resolve() == (tmp_path / "__pycache__").resolve()
    assert paths["config"] == ""


def test_a_users_numba_cache_dir_is_numbas_own_choice(tmp_path):
    paths = _probe(tmp_path, NUMBA_CACHE_DIR=str(tmp_path / "given"))
    for name in ("kernel", "sampler", "mine"):
        assert Path(paths[name]).resolve().is_relative_to((tmp_path / "given").resolve()), name


def test_an_unwritable_cache_folder_falls_back_to_numbas_default(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")  # XDG_CACHE_HOME names a file: the folder cannot be made
    paths = _probe(tmp_path, XDG_CACHE_HOME=str(blocked))
    assert Path(paths["kernel"]).resolve() == PACKAGE / "opf" / "__pycache__"  # beside the source, as before
    assert paths["config"] == ""


def test_only_paths_inside_the_kernel_cache_count_as_in_it(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "powerdp" / "numba"
    assert in_kernel_cache(folder / "x" / "k.nbi")
    assert in_kernel_cache(folder)
    assert not in_kernel_cache(tmp_path / "cache" / "powerdp" / "zone_0.csv")
    assert not in_kernel_cache(folder / ".." / ".." / "out.csv")  # resolved first
    assert not folder.exists()  # asking creates nothing
