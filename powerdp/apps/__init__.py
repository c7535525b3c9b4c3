"""Applications: each an adapter from its problem to the engine, with its tables and plots.

* :mod:`.power_flow`: distributed SOC optimal power flow by consensus ADMM over zones;
* :mod:`.market`: the zonal DC market by sharing ADMM;
* :mod:`.learning`: federated learning (consensus), noisy ADMM, vertical learning (sharing).
"""
