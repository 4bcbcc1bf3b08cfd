"""The phonebench pytest plugin (phonebench.fixtures.plugin) is loaded by the package's pytest11 entry point
`phonebench`, so `pytest` works here and in any lab repository that installs the package."""
