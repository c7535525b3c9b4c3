"""The SOC relaxation: formulation, objectives, compilation, solvers, the centralized solve."""
