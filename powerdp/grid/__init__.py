"""Case data, networks and zone partitions (docs/formulation.md)."""
