"""What a case asks and what it returns: specs from markers and YAML, and result records."""
