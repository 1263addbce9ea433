"""``python -m pytest_specperf.sim`` / ``specperf-sim``: serve a simulator until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

import yaml

from pytest_specperf.sim import faults
from pytest_specperf.sim.engine import Engine
from pytest_specperf.sim.profile import (
    ProfileError,
    builtin_profiles,
    load_profile,
    merge_overrides,
    parse_assignment,
    profile_from_dict,
)
from pytest_specperf.sim.server import run_server


def _faults_help() -> str:
    """--help's epilog: the fault syntax, taken from the faults module so the two never disagree."""
    items = [line[2:] for line in (faults.__doc__ or "").splitlines() if line.startswith("    ")]
    return ("faults: the request header X-Specperf-Fault, or the profile key faults (--set faults=...) for every\n"
            "request; items separated by , or ; e.g.  X-Specperf-Fault: stall=2.0@100, key=t1\n" + "\n".join(items)
            + "\nTimes are model seconds, divided by --speed; POST /sim/reset clears the status counters.")


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range; a port is 0 (any free one) to 65535")
    return port


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = argparse.ArgumentParser(prog="specperf-sim", description="Speculative-decoding LLM server simulator "
                                 "(OpenAI-compatible HTTP, vLLM / SGLang / llama.cpp dialects).",
                                 epilog=_faults_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="healthy",
                    help=f"built-in profile ({', '.join(builtin_profiles())}) or a YAML file (default: healthy)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile key (VALUE is YAML; dotted keys nest: accept_len.prose=3.5); repeatable")
    ap.add_argument("--dialect", choices=("vllm", "sglang", "llamacpp"), help="shortcut for --set dialect=...")
    ap.add_argument("--profile-json", help=argparse.SUPPRESS)  # a resolved profile, from SimServer
    # from SimServer: stop when the parent's end of the stdin pipe closes (the parent died, by any signal)
    ap.add_argument("--exit-on-stdin-eof", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=_port, default=0, help="0 (default) picks a free port")
    ap.add_argument("--speed", type=float, default=1.0, help="divide every time by this (default 1)")
    ap.add_argument("--list-profiles", action="store_true", help="print the built-in profile names and exit")
    ap.add_argument("--show-profile", action="store_true", help="print the resolved profile as YAML and exit")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.list_profiles:
        print("\n".join(builtin_profiles()))
        return 0
    if not args.speed > 0:
        print(f"specperf-sim: error: --speed must be > 0, got {args.speed:g}", file=sys.stderr)
        return 2
    try:
        overrides = merge_overrides([parse_assignment(s) for s in args.sets])
        if args.dialect:
            overrides["dialect"] = args.dialect
        if args.profile_json:
            profile = load_profile(profile_from_dict(json.loads(args.profile_json)), overrides)
        else:
            profile = load_profile(args.profile, overrides)
    except ProfileError as exc:
        print(f"specperf-sim: error: {exc}", file=sys.stderr)
        return 2
    if args.show_profile:
        print(yaml.safe_dump(profile.to_dict(), sort_keys=False), end="")
        return 0

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.exit_on_stdin_eof:
            fd = sys.stdin.fileno()

            def stdin_readable() -> None:
                if not os.read(fd, 4096):  # EOF: the parent closed it or died
                    loop.remove_reader(fd)
                    stop.set()

            loop.add_reader(fd, stdin_readable)

        def ready(url: str, engine: Engine) -> None:
            # The --set overrides too: two twins of one profile are told apart by them (A/B pairs).
            sets = "".join(f" {s}" for s in args.sets)
            print(f"specperf-sim listening on {url} (profile={profile.name} dialect={profile.dialect} "
                  f"model={profile.model} speed={args.speed:g}{sets})", flush=True)

        await run_server(profile, args.speed, args.host, args.port, stop, ready)

    try:
        asyncio.run(serve())
    except OSError as exc:
        print(f"specperf-sim: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    print("specperf-sim stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
