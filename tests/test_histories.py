"""Every algorithm, same seed: the history matches the one recorded before a refactor.

The reference files come from tests/data/histories/make.py; see its docstring for when to re-record.
Bit identity is a promise within one machine and library stack (serial = process = MPI, resume =
uninterrupted, same seed twice; tests/test_backends.py and tests/test_runner.py check those bit for bit).
Across machines the BLAS kernels chosen for the CPU change the last digits (about 1e-14 relative), so
the recorded histories are compared at a relative tolerance of 1e-10, which any real change breaks.
"""

import importlib.util
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent / "data" / "histories"
_spec = importlib.util.spec_from_file_location("make_histories", HERE / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

RTOL = 1e-10  # docs/cli.md, "Tests and reproducibility": recorded histories are compared at this relative tolerance
ATOL = 1e-13  # for columns that are 0 up to rounding (a residual of an exact consensus)


def assert_history_matches(got: pd.DataFrame, expected: pd.DataFrame, name: str) -> None:
    """Same columns; every value within RTOL (relative) of the recorded one."""
    assert list(got.columns) == list(expected.columns)
    for col in expected.columns:
        np.testing.assert_allclose(
            got[col].to_numpy(dtype=float), expected[col].to_numpy(dtype=float), rtol=RTOL, atol=ATOL,
            err_msg=f"{name}: column {col}",
        )


@pytest.mark.parametrize("name", sorted(make.SETTINGS))
def test_history_matches_the_recorded_one(name):
    from powerdp.apps.power_flow.runner import run_distributed

    logging.getLogger("pyomo").setLevel(logging.ERROR)
    expected = pd.read_csv(HERE / f"{name}.csv", float_precision="round_trip")
    got = run_distributed(make.config(name), reference=False).history[make.DETERMINISTIC].reset_index(drop=True)
    assert_history_matches(got, expected, name)


def test_the_comparison_forgives_another_cpu_but_not_a_real_change():
    expected = pd.read_csv(HERE / "objl.csv", float_precision="round_trip")
    # another CPU's BLAS kernels: last digits differ (measured: about 1e-14 relative)
    other_cpu = expected.copy()
    for col in ("objective", "feasibility", "dual_residual", "noise_magnitude"):
        other_cpu[col] = other_cpu[col] * (1 + 3e-14)
    assert_history_matches(other_cpu, expected, "objl")
    # a real change: one objective off by 1e-8 relative
    changed = expected.copy()
    changed.loc[2, "objective"] *= 1 + 1e-8
    with pytest.raises(AssertionError):
        assert_history_matches(changed, expected, "objl")
