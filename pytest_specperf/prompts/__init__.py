"""Prompts of a named content kind and an exact server-counted length, from the shipped corpora."""
