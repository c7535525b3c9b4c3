"""RunConfig validation: every rule names the field, and the registries drive the choices."""

import pytest

from powerdp.apps.power_flow.config import ALGORITHMS, RunConfig
from powerdp.engine.consensus.algorithms import ALIASES
from powerdp.errors import ConfigError
from powerdp.opf.objectives import OBJECTIVES


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"algorithm": "objx"}, "algorithm"),
        ({"objective": "profit"}, "objective"),
        ({"algorithm": "objl", "epsilon": 0.0}, "epsilon"),
        ({"algorithm": "objl", "epsilon": float("inf")}, "epsilon"),
        ({"algorithm": "objg", "delta": 1.0}, "delta"),
        ({"algorithm": "objl", "beta": -0.01}, "beta"),
        ({"sensitivity": "optimistic"}, "sensitivity"),
        ({"adjacency": "zone"}, "adjacency"),
        ({"noise_on": "some"}, "noise_on"),
        ({"rounds": 0}, "rounds"),
        ({"rounds": 2.5}, "rounds"),
        ({"local_updates": 0}, "local_updates"),
        ({"rho": -1.0}, "rho"),
        ({"rho_schedule": "sometimes"}, "rho_schedule"),
        ({"rho_schedule": 3}, "rho_schedule"),
        ({"eta": "fast"}, "eta"),
        ({"eta": -0.5}, "eta"),
        ({"algorithm": "nonprivate", "eta": "theorem"}, "eta"),
        ({"backend": "cloud"}, "backend"),
        ({"workers": 0}, "workers"),
        ({"flows": "maybe"}, "flows"),
        ({"convention": "psse"}, "convention"),
        ({"checkpoint_every": -1}, "checkpoint_every"),
        ({"extra": []}, "extra"),
    ],
)
def test_bad_values_name_their_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        RunConfig(case="case14", **changes)


def test_defaults_and_derived_choices():
    cfg = RunConfig(case="case14")
    assert (cfg.algorithm, cfg.update, cfg.perturbation, cfg.mechanism) == ("objl", "linearized", "objective", "laplace")
    assert cfg.private and cfg.noise_support == "data"
    assert RunConfig(case="case14", algorithm="outg").noise_support == "all"
    assert not RunConfig(case="case14", algorithm="exact", objective="cost").private
    assert set(ALGORITHMS) == set(ALIASES)
    assert {"cost", "shedding"} <= set(OBJECTIVES)


def test_round_trip_and_unknown_keys():
    cfg = RunConfig(case="case118", algorithm="trust-region/objective/gaussian", epsilon=0.5, extra={"trust_radius": 2.0})
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown key"):
        RunConfig.from_dict({"case": "case14", "epsilom": 0.1})
