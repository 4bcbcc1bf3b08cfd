"""The leaf core: errors, verdict records, statistics, Merkle trees, signatures, file writing and
paths. It imports nothing else of the project, so drivers, checks, the emulator and the CLI can
all build on it (the layer contracts are in pyproject.toml, checked by import-linter)."""
