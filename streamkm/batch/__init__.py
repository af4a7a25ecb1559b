"""Batch (offline) clustering algorithms: the foundations and exact baselines."""
