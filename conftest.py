"""The phonebench pytest plugin (fixtures.plugin) is loaded by the package's pytest11 entry point
`phonebench`, so `pytest` works here and in any lab repository that installs the package."""
