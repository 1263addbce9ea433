"""Talking to one endpoint: client, SSE traces, concurrent streams, retries, locks, server kinds."""
