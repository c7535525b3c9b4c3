"""Multi-period private dispatch: a day of distributed SOC OPF over load and renewable profiles (docs/multi_period.md)."""
