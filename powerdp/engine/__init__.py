"""The engine: coordination patterns that know nothing of power systems or of learning.

* :mod:`.consensus`: consensus ADMM — the coordinator, the messages, the update rules (:mod:`.consensus.updates`),
  the perturbations and the algorithm names that combine them;
* :mod:`.sharing`: sharing ADMM — the coordinator with its z-steps, the agents' contract and their hosts;
* :mod:`.backends`: where agents live (serial, process, MPI) and how messages reach them.

An application (``powerdp.apps``) adapts its problem to one of the patterns; the engine never imports it.
"""
