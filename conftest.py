"""Load the phonebench pytest plugin so `pytest` works from the repository root."""
pytest_plugins = ["fixtures.plugin"]
