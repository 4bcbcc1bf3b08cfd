"""The HIL suites the bench runs against a station (a package so the layer contracts can check them)."""
