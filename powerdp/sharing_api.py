"""The public API of ADMM sharing in one import (re-exported by :mod:`powerdp`): the coordinator and the agents'
contract, the engine, the DC model and market, vertical learning (docs/sharing.md, docs/market.md, docs/vertical.md)."""

from .admm.market import run_market
from .admm.sharing import SharingAgent, SharingCoordinator
from .admm.sharing_run import SharingSettings, run_sharing
from .learning.vertical import run_vertical_learning
from .opf.dc import DCModel, DCResult, dc_model, solve_dc_opf

__all__ = ["SharingAgent", "SharingCoordinator", "SharingSettings", "run_sharing", "run_market", "run_vertical_learning",
           "DCModel", "DCResult", "dc_model", "solve_dc_opf"]
