"""Every algorithm, same seed: the history is bit-identical to the one recorded before a refactor.

The reference files come from tests/data/histories/make.py; see its docstring for when to re-record.
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


@pytest.mark.parametrize("name", sorted(make.SETTINGS))
def test_history_is_bit_identical_to_the_recorded_one(name):
    from powerdp.admm.runner import run_distributed

    logging.getLogger("pyomo").setLevel(logging.ERROR)
    expected = pd.read_csv(HERE / f"{name}.csv", float_precision="round_trip")
    got = run_distributed(make.config(name), reference=False).history[make.DETERMINISTIC].reset_index(drop=True)
    assert list(got.columns) == list(expected.columns)
    for col in expected.columns:
        np.testing.assert_array_equal(got[col].to_numpy(dtype=float), expected[col].to_numpy(dtype=float), err_msg=f"{name}: column {col}")
