"""pytest hooks for pytest-specperf (options, markers, fixtures, collection, summary)."""
