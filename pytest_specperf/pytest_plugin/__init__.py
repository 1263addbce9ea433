"""The pytest layer: hooks, options, fixtures, YAML items, the end-of-run writers. Only this imports pytest."""
