"""Judging runs, records in and verdicts out: trials in log space, baselines, sequential trials, A/B, arms."""
