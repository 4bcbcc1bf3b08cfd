"""A run's record, its aggregate, lab time, the compatibility matrix and their display."""
