"""Where results are kept as JSON: saved run files (``saved_runs``). Judging (``compare/``) never imports it."""
