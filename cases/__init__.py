"""Bundled network cases (MATPOWER ``.m`` files) and zone partitions (``bus,zone`` CSV files)."""
