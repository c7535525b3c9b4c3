"""The privacy review's attacks (benchmarks/privacy_attacks.py) keep working: they win where the channel is open
(a seeded run, the test-only leak switch) and the current messages carry nothing but the release."""

import importlib.util
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parents[1] / "benchmarks" / "privacy_attacks.py"
_spec = importlib.util.spec_from_file_location("privacy_attacks", _path)
attacks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(attacks)


def test_replay_wins_against_a_seeded_run():
    r = attacks.replay_attack(bits=4, seed=3)
    assert r["noise_source"] == "seeded" and r["tp"] == r["positives"] and r["fp"] == 0


@pytest.mark.parametrize("leak", [False, True])
def test_noise_magnitude_attack_needs_the_leak(leak):
    r = attacks.noise_magnitude_attack(bits=4, leak=leak)
    if leak:
        assert "noise_magnitude" in r["message_fields"] and r["tp"] == r["positives"] and r["fp"] == 0
    else:
        assert r["message_fields"] == ["released", "round", "zone"]
