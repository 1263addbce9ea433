"""Measuring loops: a case's whole trials, A/B and N arms interleaved, repeats until the judging rules decide."""
