"""Consensus ADMM: coordinator, messages, update rules, perturbations (docs/algorithm.md)."""
