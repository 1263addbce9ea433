"""What a report shows for each case kind, as plain data (no drawing)."""
