"""Studies built on the applications: sweeps, figures, empirical privacy audits."""
