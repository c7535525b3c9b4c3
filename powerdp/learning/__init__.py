"""Learning applications of the engine: vertical (feature-split) learning by ADMM sharing (vertical.py)."""
