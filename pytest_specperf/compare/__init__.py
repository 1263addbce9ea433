"""Comparing runs: trials in log space, baselines, sequential trials, A/B and the crossover, saved runs."""
