"""Issue 36, item 5: every private run writes coordinator_view/privacy_receipt.json, and ``powerdp privacy verify``
re-accounts it with dp-accounting alone, agreeing with the ledger within 1 % on every algorithm of every application,
and exits 3 on a receipt that claims more noise than the releases had."""

from __future__ import annotations

import json
import warnings

import pytest

from powerdp.cli import main
from powerdp.privacy.verify import RECEIPT_FILE, SCHEMA, load_receipt, reaccount, verify_receipt

pytestmark = pytest.mark.filterwarnings("ignore")


def _verified(out, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["privacy", "verify", str(out), "--json", str(out / "verify.json")]) == 0, capsys.readouterr()
    rows = json.loads((out / "verify.json").read_text())["rows"]
    assert rows and all(r["supported"] and r["agrees"] for r in rows), rows
    return rows


POWER_FLOW = {
    "objl": [], "objg": ["--target-delta", "1e-5"], "inpl": [], "inpg": ["--target-delta", "1e-5"], "outl": [],
    "outg": ["--target-delta", "1e-5"], "objl-pld": ["--target-delta", "1e-5"],
    # issue 37: the totals and hierarchical releases (one release of a zone's totals, or totals and loads, per run)
    "totl": ["--objective", "cost+shedding"], "totg": ["--objective", "cost+shedding", "--target-delta", "1e-5"],
    "hrcl": ["--objective", "cost+shedding"], "hrcg": ["--objective", "cost+shedding", "--target-delta", "1e-5"],
}


@pytest.mark.parametrize("name", sorted(POWER_FLOW))
def test_power_flow_receipts_are_re_accounted_as_the_ledger(tmp_path, capsys, name):
    algorithm = name.split("-")[0]
    out = tmp_path / name
    assert main(["run", "case14", "--zones", "2", "--algorithm", algorithm, "--target-epsilon", "1", *POWER_FLOW[name],
                 "--rounds", "4", "--out", str(out), "--no-reference", "-q"]) == 0
    receipt = load_receipt(out)
    assert receipt["schema"] == SCHEMA and receipt["application"] == "power_flow" and receipt["relation"]["name"] == "value"
    rows = _verified(out, capsys)
    assert all(r["ledger_epsilon"] == pytest.approx(1.0, rel=1e-3) for r in rows)
    release = receipt["units"][0]["releases"][0]
    assert release["mechanism"].startswith("discrete_") and release["entries"] > 0 and release["count"] > 0


@pytest.mark.parametrize("algorithm, relation, extra", [("objl", "user", []), ("objl", "event", []),
                                                        ("inpg", "user", ["--target-delta", "1e-5"]),
                                                        ("inpg", "event", ["--target-delta", "1e-5"]),
                                                        ("totl", "event", ["--target-delta", "1e-5"]),
                                                        ("totg", "user", ["--target-delta", "1e-5"])])
def test_dispatch_receipts_are_re_accounted_as_the_ledger(tmp_path, capsys, algorithm, relation, extra):
    from .test_dispatch import day_profile

    out = tmp_path / "day"
    profile = day_profile(tmp_path / "day.csv", 3)
    assert main(["dispatch", "case14", "--profiles", str(profile), "--periods", "3", "--zones", "2", "--algorithm", algorithm,
                 "--relation", relation, "--target-epsilon", "1", *extra, "--max-rounds", "3", "--out", str(out),
                 "--no-reference", "-q"]) == 0
    receipt = load_receipt(out)
    assert receipt["relation"]["name"] == relation and receipt["run"]["periods"] == 3
    _verified(out, capsys)


@pytest.mark.parametrize("algorithm, extra", [("objl", []), ("objg", ["--target-delta", "1e-5"]), ("objt", []),
                                              ("outp", ["--target-delta", "1e-5"]), ("outl", [])])
def test_learning_receipts_are_re_accounted_as_the_ledger(tmp_path, capsys, algorithm, extra):
    out = tmp_path / algorithm
    assert main(["learn", "digits", "--algorithm", algorithm, "--target-epsilon", "1", *extra, "--clients", "3", "--rounds", "4",
                 "--out", str(out), "-q"]) == 0
    assert load_receipt(out)["units"][0]["unit"] == "client"
    _verified(out, capsys)


def test_market_vertical_and_noisy_admm_receipts_are_re_accounted_as_the_ledger(tmp_path, capsys):
    warnings.filterwarnings("ignore")
    runs = {
        "market": ["run", "case14", "--zones", "3", "--model", "dc", "--algorithm", "outg", "--target-epsilon", "1",
                   "--target-delta", "1e-5", "--rounds", "10"],
        "vertical": ["learn", "breast_cancer", "--vertical", "--parties", "3", "--algorithm", "gaussian", "--target-epsilon", "1",
                     "--rounds", "10"],
        "noisy": ["learn", "elastic-net", "--algorithm", "noisy-admm", "--rounds", "100", "--sigma", "0.5"],
    }
    units = {"market": "agent", "vertical": "party", "noisy": "user"}
    for name, argv in runs.items():
        out = tmp_path / name
        assert main([*argv, "--out", str(out), "-q"]) == 0, name
        assert load_receipt(out)["units"][0]["unit"] == units[name]
        _verified(out, capsys)



def _verify_with_half_the_noise(receipt: dict, unit: int, tmp_path, capsys) -> tuple[int, str]:
    """``powerdp privacy verify`` of ``receipt`` edited to state half of ``unit``'s noise: its exit status and output."""
    for release in receipt["units"][unit]["releases"]:
        release["grid_scale"] /= 2
        release["noise_scale"] /= 2
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(receipt))
    capsys.readouterr()
    status = main(["privacy", "verify", str(edited)])
    return status, capsys.readouterr().out

def test_a_receipt_that_states_less_noise_than_the_ledger_needs_exits_3(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "case14", "--zones", "2", "--algorithm", "objg", "--target-epsilon", "1", "--target-delta", "1e-5",
                 "--rounds", "4", "--out", str(out), "--no-reference", "-q"]) == 0
    path = out / "coordinator_view" / RECEIPT_FILE
    status, text = _verify_with_half_the_noise(json.loads(path.read_text()), 1, tmp_path, capsys)  # zone 1's noise halved
    assert status == 3
    assert "FAILED" in text and "zone 1" in text
    assert main(["privacy", "verify", str(tmp_path / "nowhere")]) == 2


@pytest.mark.parametrize("algorithm, extra", [("totl", []), ("totg", ["--target-delta", "1e-5"])])
def test_a_totals_receipt_verifies_and_an_edited_one_exits_3(tmp_path, capsys, algorithm, extra):
    """Issue 37: the zones' one release of their load totals is in the receipt (its sensitivity β, one coordinate under
    the value adjacency for the Laplace, two entries, counted once however many rounds), re-accounted as the ledger; the same receipt
    with zone 0's noise halved is refused."""
    out = tmp_path / algorithm
    assert main(["run", "case14", "--zones", "2", "--objective", "cost+shedding", "--algorithm", algorithm,
                 "--target-epsilon", "1", *extra, "--rounds", "6", "--out", str(out), "--no-reference", "-q"]) == 0
    receipt = load_receipt(out)
    for unit in receipt["units"]:
        (release,) = unit["releases"]
        assert release["count"] == 1 and release["entries"] == 2
        assert release["coordinates"] == (1 if algorithm == "totl" else None)  # the Gaussian's L2 shift needs none
        assert release["sensitivity"] == pytest.approx(receipt["relation"]["beta"], rel=1e-12)
    rows = _verified(out, capsys)
    assert all(r["ledger_epsilon"] == pytest.approx(1.0, rel=1e-3) for r in rows)
    status, text = _verify_with_half_the_noise(receipt, 0, tmp_path, capsys)
    assert status == 3
    assert "FAILED" in text


def test_the_discrete_laplace_pld_is_the_exact_loss():
    """The verifier's own PLD of the discrete Laplace (built from its pmf, not dp-accounting's enumeration): at δ = 0
    its ε is the pure k/t rounded up by at most its bucket, and at δ > 0 it is below the pure sum, as the continuous
    Laplace's PLD at the same ratio."""
    release = {"mechanism": "discrete_laplace", "norm": "l1", "sensitivity": 0.02, "coordinates": 1, "epsilon": 0.1,
               "grid": 2.0**-45, "entries": 10, "grid_scale": 7036874417767, "count": 20,
               "tail": {"exact": True, "delta": 0.0, "pmf_relative_error": 2.0**-40}}
    acc = reaccount([release], 0.0)
    k = int(0.02 / 2.0**-45) + 1
    assert acc["pure"] == pytest.approx(20 * k / 7036874417767, rel=1e-9)
    with_delta = reaccount([release], 1e-6)
    import dp_accounting

    continuous = dp_accounting.pld.PLDAccountant()
    continuous.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(7036874417767 / k), 20))
    assert with_delta["pld"] < acc["pure"]
    # pessimistic: each of the 20 losses is rounded up by at most two of its buckets (1e-4 each)
    assert continuous.get_epsilon(1e-6) - 1e-9 <= with_delta["pld"] <= continuous.get_epsilon(1e-6) + 20 * 2e-4


def test_verify_rows_name_their_accountants(tmp_path):
    receipt = {"schema": SCHEMA, "application": "x", "run": {}, "relation": {}, "units": [
        {"unit": "zone", "id": 0, "ledger": {"epsilon": 1.0, "delta": 1e-5, "source": "tight:analytic", "steps": 10},
         "releases": [{"mechanism": "discrete_gaussian", "norm": "l2", "sensitivity": 1.0, "noise_multiplier": 10.0,
                       "epsilon": 0.5, "delta": 1e-5, "grid": 2.0**-37, "entries": 4, "grid_scale": 10.0 * 2**37 * (1 + 2 * 2.0**-37),
                       "count": 10, "tail": {"exact": False, "delta": 1e-300, "pmf_relative_error": 2.0**-40}}]}]}
    (row,) = verify_receipt(receipt)
    assert row["accountant"] == "analytic" and row["rdp"] >= row["analytic"] and row["pld"] == pytest.approx(row["analytic"], rel=1e-2)
