"""Where results are kept, as JSON files (``saved_runs``) and the history's SQL (``store``, ``schema``, ``records``)."""
