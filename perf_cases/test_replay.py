import pytest


# Production traffic instead of one prompt length: the first 3 s of Mooncake's conversation trace (shipped with
# the plugin), each request sent at its own time, twice as fast, with its exact prompt and output lengths and the
# prefixes its hash_ids share. TTFT is gated per input length, since a long prompt's TTFT is a different promise.
# The window's ten requests bring about 110k prompt tokens at once: on the embedded simulator they prefill together
# and every first token comes about 5.6 s after its send, so the short prompts' ceilings sit at 10 s here.
@pytest.mark.replay(trace="builtin:mooncake-conversation", speed=2, duration_s=3,
                    max_ttft_p90_s={"<1k": 10, "1-4k": 10, "4-16k": 15, ">16k": 40})
def test_mooncake_window(specperf):
    r = specperf.result
    # every row went out and came back at the length the trace asked, as the server counted it
    assert r.not_sent == 0 and r.length_mismatches == 0
