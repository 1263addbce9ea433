"""The ``two_point`` case: decode rate as (long - short) / (t_long - t_short) on one prompt."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.closed_loop import TwoPointSpec
from pytest_specperf.cases.results import TwoPointResult
from pytest_specperf.run import stream_figures
from pytest_specperf.run.context import CaseContext, Until, case_seed, more_trials
from pytest_specperf.run.floors import JudgeSettings, settle

#: Pairs measured before a two-point span is refused as within the client's timing noise (their medians judged).
NOISE_PAIRS = 3


def two_point(context: CaseContext, spec: TwoPointSpec, nodeid: str = "", *, seed: int | None = None,
              until: Until | None = None) -> TwoPointResult:
    """(long - short) / (t_long - t_short) on one prompt, its prefix cache warmed first.

    ``seed`` defaults to the case's own; every request carries it and the case's temperature.
    With ``repeat="auto"`` pairs are added until ``until`` decides (``max_repeat`` at most).
    """
    seed = case_seed(nodeid) if seed is None else seed
    client = context.client
    prompt = context.prompt(spec.content, spec.ctx, seed, spec.api)
    # One prompt (cold: its own tag or salt) that the pair shares on purpose: both requests prefill alike.
    ask = functools.partial(client.complete, api=spec.api, temperature=spec.temperature, seed=seed, salt=context.salt())
    samples: list[float] = []
    server: list[float | None] = []
    shorts, longs, noise = [], [], []
    usage: dict[str, Any] = {}
    med = stream_figures.median

    def pair() -> None:
        nonlocal usage
        # Warm the prefix cache so both requests prefill alike (servers that cache reuse it; others redo it).
        ask(prompt.text, 1)
        short = ask(prompt.text, spec.short)
        again = ask(prompt.text, spec.short)  # the same request once more: how much the client's timing varies
        long = ask(prompt.text, spec.long)
        n_long = int(long.usage.get("completion_tokens", 0))  # not result data
        stream_figures.check_length(spec.long, n_long, long.finish_reason, client.kind)
        samples.append(stream_figures.two_point_rate(short, long))
        server.append(stream_figures.server_two_point_rate(short, long))
        shorts.append(short.elapsed_s)
        longs.append(long.elapsed_s)
        noise.append(abs(again.elapsed_s - short.elapsed_s))
        usage = long.usage

    while more_trials(spec, len(samples), lambda: until is not None and not until({"decode_tps": samples})):
        pair()
    # One pair's noise is one draw: a busy host's late wake-up in it (55 ms against a 358 ms span, seen beside three
    # pytest workers on 2 cores) is not the client's noise. Before refusing, measure pairs until there are
    # NOISE_PAIRS and judge their medians; a server too fast to time stays refused (every pair says so).
    while (len(samples) < NOISE_PAIRS
           and not stream_figures.span_timed(med(longs) - med(shorts), med(noise))):
        pair()
    stream_figures.check_span("two-point", med(longs) - med(shorts), med(noise), spec.long - spec.short)
    r: TwoPointResult = context.new_result(
        TwoPointResult, spec, spec.ctx, usage.get("prompt_tokens"),  # not result data: the server's usage
        nodeid, short=spec.short, long=spec.long,
        t_short_s=med(shorts), t_long_s=med(longs), decode_tps=med(samples), repeat=len(samples),
        samples_tps=samples, server_samples_tps=[x for x in server if x is not None] if all(server) else [])
    return r


def problems(r: TwoPointResult, spec: TwoPointSpec) -> list[str]:
    """The two-point decode under its floor, or nothing."""
    if spec.min_tps is not None and r.decode_tps < spec.min_tps:
        return [f"two-point decode {r.decode_tps:.1f} tok/s < min_tps {spec.min_tps:g} "
                f"({r.short} vs {r.long} tokens) at ctx {r.prompt_tokens}"]
    return []


class TwoPoint:
    """The ``two_point`` kind."""

    name: ClassVar[str] = "two_point"
    spec_type: ClassVar[type[CaseSpec]] = TwoPointSpec

    def context_needed(self, spec: TwoPointSpec) -> tuple[int, int]:
        """The long request: ctx prompt tokens, ``long`` generated."""
        return spec.ctx, spec.long

    def measure(self, context: CaseContext, spec: TwoPointSpec, nodeid: str, until: Until | None = None
                ) -> TwoPointResult:
        """``two_point`` with the case's own seed."""
        return two_point(context, spec, nodeid, until=until)

    def judge(self, result: TwoPointResult, spec: TwoPointSpec, settings: JudgeSettings) -> None:
        """Its floor on the two-point decode rate."""
        settle(result, spec, problems(result, spec), settings.inconclusive)
