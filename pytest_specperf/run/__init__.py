"""Running and judging cases: one module per case kind, the registry that dispatches to them."""
