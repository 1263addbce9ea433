"""Outputs: the table, JSON, Markdown, JUnit, Bencher, HTML and plots."""
