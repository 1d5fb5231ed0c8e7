"""Repository-level conftest: pytester for the plugin's own unit tests (tests/unit)."""
pytest_plugins = ["pytester"]
