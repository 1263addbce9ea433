"""Top-level conftest: the plugin's own tests drive pytest runs with pytester."""

pytest_plugins = ["pytester"]
