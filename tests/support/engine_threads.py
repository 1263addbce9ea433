"""How many threads the engines these tests start may use.

One. With two, llama.cpp's threads meet at a barrier on every layer, so on a 2-core host that also runs
the test client (and, in CI, other jobs) one descheduled thread stalls both: on such a host the shipped
perf_cases took 244 s on the default threads and 85 s on one.
"""

THREADS = 1
#: The same as engine flags, for engines started from a command line (--specperf-engine-args).
THREAD_ARGS = ("--threads", str(THREADS), "--threads-batch", str(THREADS))
