"""A zone's private load file in a deployment must hold exactly the zone's own buses (issue 25, item 4): a bus of
another zone, a missing own bus (its load silently 0) or a bus listed twice (the last line won) all ran to exit 0."""

import pandas as pd
import pytest

from powerdp.apps.power_flow.zone_data import zone_loads_path
from powerdp.cli import main


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    d = tmp_path_factory.mktemp("deployment") / "split"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    return d


def _run(capsys, split) -> tuple[int, str]:
    status = main(["-q", "run", "--deployment", str(split), "--no-evaluation", "--rounds", "1", "--seed", "1"])
    return status, capsys.readouterr().err


def _edit(split, tmp_path, change):
    """A copy of the deployment whose zone 1 load file went through ``change`` (a DataFrame -> DataFrame)."""
    import shutil

    d = tmp_path / "edited"
    shutil.copytree(split, d)
    path = zone_loads_path(d, 1)
    change(pd.read_csv(path, float_precision="round_trip")).to_csv(path, index=False)
    return d


def test_the_files_as_written_run(capsys, split):
    assert _run(capsys, split)[0] == 0


def test_a_bus_of_another_zone_is_refused(capsys, split, tmp_path):
    other = pd.read_csv(zone_loads_path(split, 0))["bus"].iloc[0]
    d = _edit(split, tmp_path, lambda f: pd.concat([f, pd.DataFrame({"bus": [other], "pd": [0.1], "qd": [0.0]})]))
    status, err = _run(capsys, d)
    assert status == 2 and f"lists bus {other}, which is not one of zone 1's buses" in err, err


def test_a_missing_own_bus_is_refused(capsys, split, tmp_path):
    dropped = pd.read_csv(zone_loads_path(split, 1))["bus"].iloc[-1]
    d = _edit(split, tmp_path, lambda f: f.iloc[:-1])
    status, err = _run(capsys, d)
    assert status == 2 and f"has no line for its bus {dropped}" in err, err


def test_a_bus_listed_twice_is_refused(capsys, split, tmp_path):
    twice = pd.read_csv(zone_loads_path(split, 1))["bus"].iloc[0]
    d = _edit(split, tmp_path, lambda f: pd.concat([f, f.iloc[:1].assign(pd=9.9)]))
    status, err = _run(capsys, d)
    assert status == 2 and f"lists bus {twice} twice" in err, err
