"""pytest-specperf: gate deploys of speculative-decoding LLM inference services on sustained performance."""

__version__ = "0.1.0"
