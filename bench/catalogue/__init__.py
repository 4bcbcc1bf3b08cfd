"""Runtime builds the bench can install: the catalogue a lab's build system fills (catalogue.py)
and installing one of its builds on a phone over ADB (install.py). docs/builds.md."""
