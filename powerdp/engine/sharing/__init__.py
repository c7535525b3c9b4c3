"""Sharing ADMM: the coordinator and its z-steps, the agents' contract, the agents' hosts (docs/sharing.md)."""
