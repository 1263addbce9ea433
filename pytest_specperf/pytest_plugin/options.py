"""Command-line options, their ini twins, and validation into Settings before anything runs."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from pytest_specperf.errors import ConfigError
from pytest_specperf.files import check_writable
from pytest_specperf.prompts.files import BUILTIN_PREFIX, load_prompts
from pytest_specperf.run.target import arm_name
from pytest_specperf.settings import STEP_SUMMARY, Settings
from pytest_specperf.storage.saved_runs import slug
from pytest_specperf.storage.store import HistoryError, parse_target
from pytest_specperf.urls import redact_text, redact_url


def _sim_profiles() -> list[str]:
    """The built-in simulator profiles, read from the simulator's profiles folder (as ``sim.builtin_profiles`` does,
    without importing the simulator into every pytest run)."""
    folder = Path(__file__).resolve().parents[1] / "sim" / "profiles"
    return sorted(p.name.removesuffix(".yaml") for p in folder.glob("*.yaml"))


# (option, ini name, help). Every option's default is None so the ini twin can fill it.
OPTIONS: list[tuple[tuple[str, ...], str, str] | tuple[tuple[str, ...], str, str, dict[str, Any]]] = [
    (("--specperf-endpoint", "--endpoint"), "specperf_endpoint",
     "base URL of an OpenAI-compatible server to measure (vLLM, SGLang, llama.cpp, TGI, Ollama), "
     "e.g. http://host:8000; without it the embedded simulator runs"),
    (("--specperf-model", "--model"), "specperf_model", "model name to request (default: the first one served)"),
    (("--api-key-env", "--specperf-api-key-env"), "specperf_api_key_env",
     "name of the environment variable holding the API key (default SPECPERF_API_KEY, then OPENAI_API_KEY)"),
    (("--specperf-sim",), "specperf_sim",
     f"embedded simulator profile when no endpoint is given: a built-in name ({', '.join(_sim_profiles())}) or a "
     "profile YAML file (default healthy)"),
    (("--specperf-sim-speed",), "specperf_sim_speed",
     "run the embedded simulator X times faster than real time; measured rates scale by X (default 1)"),
    (("--specperf-engine",), "specperf_engine",
     "start a local engine for the session instead of the simulator: llamacpp or vllm"),
    (("--specperf-engine-model",), "specperf_engine_model",
     "model for --specperf-engine: a GGUF (llamacpp) or a Hugging Face folder (vllm); default SmolLM2-135M"),
    (("--specperf-engine-preset",), "specperf_engine_preset",
     "speculation preset for --specperf-engine: ngram, self-draft (llamacpp only) or none (default ngram)"),
    (("--specperf-engine-args",), "specperf_engine_args", "extra arguments for the engine, as one shell-quoted string"),
    (("--specperf-timeout",), "specperf_timeout",
     "seconds without data before a request is an error (stall, no answer); default 60"),
    (("--specperf-json",), "specperf_json", "write every case's result fields to this JSON file (atomically)"),
    (("--specperf-max-drift",), "specperf_max_drift",
     "default maximum drift (1 - late/early decode rate) for sustained cases; default 0.15"),
    (("--specperf-save",), "specperf_save",
     "save this run's results as a baseline (optionally named) in the storage folder; the words true/yes/on/1 "
     "mean an automatic name, false/no/off/0 mean do not save", {"nargs": "?", "const": ""}),
    (("--specperf-compare",), "specperf_compare",
     "compare every case with a saved run (default: the latest; or give its name or number)",
     {"nargs": "?", "const": ""}),
    (("--specperf-compare-strict",), "specperf_compare_strict",
     "judge against a baseline measured differently (other model, server version, temperature, plugin version or "
     "machine) as if it were comparable; by default such a would-be regression is inconclusive",
     {"action": "store_const", "const": "true"}),
    (("--specperf-history",), "specperf_history",
     "judge every case against its history and record this run in it: a SQLite file (default "
     ".specperf/history.sqlite under the rootdir; a relative path is read from the rootdir) or a "
     "postgresql://USER@HOST/DB URL shared by a team's CI runners; false/no/off/0 mean no history",
     {"nargs": "?", "const": ""}),
    (("--specperf-storage",), "specperf_storage",
     "folder for saved runs, relative to the rootdir (default .specperf/runs)"),
    (("--specperf-max-regression",), "specperf_max_regression",
     "largest tolerated slowdown against the baseline or A, as a fraction (default 0.05)"),
    (("--specperf-inconclusive",), "specperf_inconclusive",
     "what a comparison too noisy to decide does: pass, warn (default) or fail"),
    (("--specperf-ab",), "specperf_ab",
     "A/B in one run: URL_A,URL_B; every case runs on both, interleaved ABBA, and B is judged against A"),
    (("--specperf-ab-trials",), "specperf_ab_trials", "trials per arm in A/B and arms mode (default 5)"),
    (("--specperf-arms",), "specperf_arms",
     "N named arms in one run: NAME=URL,NAME=URL,...; every case runs on each, interleaved (ABC CBA ...), and "
     "load cases get the best arm per level and a schedule"),
    (("--specperf-arms-baseline",), "specperf_arms_baseline",
     "the baseline arm of --specperf-arms (default the first); cases without deployed= judge this arm"),
    (("--specperf-arms-tokens",), "specperf_arms_tokens",
     "each arm's number of speculative tokens, NAME=K,... (0: no speculation); the schedule then maps batch size "
     "to num_speculative_tokens"),
    (("--specperf-engine-arms",), "specperf_engine_arms",
     "with --specperf-engine: start one engine per arm and run them as --specperf-arms: speculative tokens per "
     "arm, e.g. none,2,4 (llamacpp: --spec-draft-n-max K with self-draft; vllm: num_speculative_tokens K)"),
    (("--specperf-markdown",), "specperf_markdown",
     "write a Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when that is set)"),
    (("--specperf-bencher",), "specperf_bencher", "write the results in Bencher Metric Format (JSON) here"),
    (("--specperf-html",), "specperf_html", "write a self-contained HTML report with plots here (opens offline)"),
    (("--specperf-prompts",), "specperf_prompts",
     "prompt file (or builtin:NAME) for sustained, load_sweep, rate and capacity cases that give no prompts, ctx "
     "or content of their own; a relative path is read from the current folder (option) or the rootdir (ini)"),
    (("--specperf-workers",), "specperf_workers",
     "worker processes sending each load case's streams (sustained with concurrency, load_sweep, rate, capacity, "
     "session, replay): a number, or auto (as many as the case needs, up to the cores); default 1, the pytest "
     "process itself"),
    (("--specperf-hosts",), "specperf_hosts",
     "other hosts sending load too, comma-separated execnet specs, e.g. ssh=ci@loadgen1,socket=10.0.0.5:8888 "
     "(one worker each; each needs this pytest-specperf version; see docs/scale-out.md)"),
    (("--specperf-plots",), "specperf_plots",
     "write one PNG per case into this folder (the Markdown summary links them)"),
]


def add_options(parser: pytest.Parser) -> None:
    """Register options and ini twins."""
    group = parser.getgroup("specperf", "speculative-decoding performance cases (pytest-specperf)")
    for names, ini, help_text, *extra in OPTIONS:
        group.addoption(*names, dest=ini, default=None, help=help_text, **(extra[0] if extra else {}))
        parser.addini(ini, help_text, default=None)


def _raw(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    if value is None:
        value = config.getini(name)
    return value if value not in ("", None, []) else None


def _number(config: pytest.Config, name: str, default: float, low: float, high: float | None = None) -> float:
    raw = _raw(config, name)
    if raw is None:
        return default
    flag = _option_flag(name)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{flag}={raw!r} is not a number; give e.g. {flag}={default:g}") from None
    if not (value > low and (high is None or value < high)):
        span = f"between {low:g} and {high:g}" if high is not None else f"greater than {low:g}"
        if (low, high) == (0.0, 1.0):  # a share: 5 was likely meant as 5%, so say the unit and how to write it
            percent = value if 1 < value < 100 else 5.0
            span = f"a fraction {span} ({percent / 100:g} for {percent:g}%)"
        raise ConfigError(f"{flag}={raw} is out of range; it must be {span}")
    return value


def read_settings(config: pytest.Config) -> Settings:
    """Validate every option; a bad value raises ConfigError naming the option and the fix."""
    endpoint = _endpoint(config)
    key_env = _api_key_env(config)
    engine, preset, engine_model, engine_args = _engine(config, endpoint)
    sim = _sim(config, load=not (endpoint or engine))
    json_path, markdown, bencher = _report_files(config)
    inconclusive = _choice(config, "specperf_inconclusive", "warn", ("pass", "warn", "fail"))
    ab_pair = _ab(config, other_target=bool(endpoint or engine))
    trials = _ab_trials(config)
    engine_arms = _engine_arms(config, engine, other=bool(ab_pair or _raw(config, "specperf_arms")))
    arms, arms_baseline, arms_tokens = _arms(config, other_target=bool(endpoint or engine or ab_pair),
                                             engine_arms=engine_arms)
    compare_name = _run_name(config, "specperf_compare")
    save_name = _run_name(config, "specperf_save")
    storage = _storage(config, saving=save_name is not None)
    return Settings(
        endpoint=endpoint,
        model=_raw(config, "specperf_model"),
        api_key_env=key_env,
        sim=sim,
        sim_speed=_number(config, "specperf_sim_speed", 1.0, 0.0),
        engine=engine,
        engine_model=engine_model,
        engine_preset=preset,
        engine_args=engine_args,
        timeout=_number(config, "specperf_timeout", 60.0, 0.0),
        json_path=json_path,
        max_drift=_number(config, "specperf_max_drift", 0.15, 0.0, 1.0),
        save=None if save_name is None else str(save_name),
        compare=None if compare_name is None else str(compare_name),
        storage=storage,
        max_regression=_number(config, "specperf_max_regression", 0.05, 0.0, 1.0),
        inconclusive=inconclusive,
        ab=ab_pair,
        ab_trials=trials,
        arms=arms,
        arms_baseline=arms_baseline,
        arms_tokens=arms_tokens,
        engine_arms=engine_arms,
        markdown=markdown,
        bencher=bencher,
        compare_strict=_flag(config, "specperf_compare_strict"),
        html=_out_file(config, "specperf_html"),
        plots=_out_dir(config, "specperf_plots"),
        prompts=_prompts(config),
        history=_history(config),
        workers=_workers(config),
        hosts=_hosts(config),
    )


def _workers(config: pytest.Config) -> int | str:
    """--specperf-workers: a whole number of at least 1, or auto."""
    raw = _raw(config, "specperf_workers")
    if raw is None:
        return 1
    text = str(raw).strip().lower()
    if text == "auto":
        return "auto"
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--specperf-workers={raw!r} is not a whole number of at least 1 or auto; give e.g. "
                          "--specperf-workers=4 or --specperf-workers=auto")
    return int(text)


def _hosts(config: pytest.Config) -> tuple[str, ...]:
    """--specperf-hosts: execnet specs (ssh=, socket=, popen), comma-separated."""
    raw = _raw(config, "specperf_hosts")
    if raw is None:
        return ()
    specs = tuple(s.strip() for s in str(raw).split(",") if s.strip())
    for spec in specs:
        if not spec.split("//")[0].startswith(("ssh=", "socket=", "popen")):
            raise ConfigError(f"--specperf-hosts: {spec!r} is not an execnet gateway spec; give ssh=USER@HOST or "
                              "socket=HOST:PORT, comma-separated")
    return specs


def _history(config: pytest.Config) -> str | None:
    """--specperf-history: None (off), else the SQLite file (absolute) or the PostgreSQL URL."""
    raw = config.getoption("specperf_history")
    if raw is None:
        raw = config.getini("specperf_history")
        if raw in ("", None, []):
            return None
    text = str(raw).strip()
    if text.lower() in NO:
        return None
    try:
        target = parse_target("" if text.lower() in YES else text, config.rootpath)
    except HistoryError as exc:
        raise ConfigError(f"--specperf-history: {exc}") from None
    if target.url is not None:
        return target.url
    assert target.path is not None
    if target.path.is_dir():
        raise ConfigError(f"--specperf-history={text} is a folder; give a file, e.g. "
                          f"--specperf-history={Path(text) / 'history.sqlite'}")
    check_writable(target.path.parent, f"--specperf-history={text}")  # a missing folder is created when it opens
    return str(target.path)


def _prompts(config: pytest.Config) -> str | None:
    """The run's default prompt file, absolute (or builtin:NAME), read now so a bad one stops the run."""
    from_option = config.getoption("specperf_prompts") not in (None, "")
    raw = _raw(config, "specperf_prompts")
    if raw is None:
        return None
    text = str(raw)
    if not text.startswith(BUILTIN_PREFIX):
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = (config.invocation_params.dir if from_option else config.rootpath) / path
        text = str(path)
    try:
        load_prompts(text)
    except ConfigError as exc:
        raise ConfigError(f"--specperf-prompts: {exc}") from None
    return text


def _option_flag(name: str) -> str:
    """The command-line flag of an ini name: specperf_ab_trials -> --specperf-ab-trials."""
    return "--" + name.replace("_", "-")


def _choice(config: pytest.Config, name: str, default: str, choices: tuple[str, ...]) -> str:
    value = str(_raw(config, name) or default)
    if value not in choices:
        raise ConfigError(f"{_option_flag(name)}={value!r} is not known; use {', '.join(choices[:-1])} "
                          f"or {choices[-1]}")
    return value


def _endpoint(config: pytest.Config) -> str | None:
    endpoint = _raw(config, "specperf_endpoint")
    if endpoint is None:
        return None
    return _check_url(str(endpoint), "--endpoint")  # a pasted OpenAI base URL (.../v1) is accepted


def _api_key_env(config: pytest.Config) -> str | None:
    key_env: str | None = _raw(config, "specperf_api_key_env")
    if key_env is not None and not str(key_env).replace("_", "").isalnum():
        raise ConfigError(f"--api-key-env={key_env!r} must be the NAME of an environment variable, e.g. "
                          "--api-key-env=MY_KEY (never the key itself)")
    if key_env is not None and not os.environ.get(str(key_env)):
        # Asked for by name: a missing key would only show later as HTTP 401 on every case.
        raise ConfigError(f"--api-key-env={key_env}: the variable {key_env} is not set (or empty); export it "
                          "with the API key, or drop --api-key-env")
    return key_env


def _engine(config: pytest.Config,
            endpoint: str | None) -> tuple[str | None, str, Path | None, tuple[str, ...]]:
    """(engine, preset, model, extra arguments) of a local engine; an engine and an endpoint exclude each other."""
    engine = _raw(config, "specperf_engine")
    if engine is not None and engine not in ("llamacpp", "vllm"):
        raise ConfigError(f"--specperf-engine={engine!r} is not known; use --specperf-engine=llamacpp or vllm")
    if engine and endpoint:
        raise ConfigError("--specperf-engine and --endpoint both given; measure either a local engine or an "
                          "endpoint, drop one")
    preset = _choice(config, "specperf_engine_preset", "ngram", ("ngram", "self-draft", "none"))
    if engine == "vllm" and preset == "self-draft":
        raise ConfigError("--specperf-engine-preset=self-draft is llama.cpp's; vllm has ngram and none")
    engine_model = _raw(config, "specperf_engine_model")
    if engine == "vllm" and engine_model is not None:
        if not (Path(engine_model) / "config.json").is_file():
            raise ConfigError(f"--specperf-engine-model={engine_model}: not a Hugging Face model folder "
                              "(no config.json); vllm needs one, not a .gguf")
    elif engine_model is not None and not Path(engine_model).is_file():
        raise ConfigError(f"--specperf-engine-model={engine_model}: no such file; give the path of a .gguf model")
    engine_args = _engine_args(config) if engine else ()  # only parsed when an engine is asked for
    return engine, preset, Path(engine_model) if engine_model else None, engine_args


def _sim(config: pytest.Config, *, load: bool) -> str:
    """The simulator profile's name or file; loaded now when the simulator will run."""
    sim = str(_raw(config, "specperf_sim") or "healthy")
    if sim.endswith((".yaml", ".yml")) and not Path(sim).is_file():
        raise ConfigError(f"--specperf-sim={sim}: no such profile file; give a built-in profile name or a YAML path")
    if load:
        from pytest_specperf.sim import ProfileError, load_profile

        try:
            load_profile(sim)  # validated now, so a typo is a usage error before anything runs
        except ProfileError as exc:
            raise ConfigError(f"--specperf-sim={sim}: {exc}") from None
    return sim


def _report_files(config: pytest.Config) -> tuple[Path | None, Path | None, Path | None]:
    """(json, markdown, bencher) output files, each checked writable now."""
    json_path, markdown, bencher = (_out_file(config, n) for n in ("specperf_json", "specperf_markdown",
                                                                    "specperf_bencher"))
    summary = os.environ.get(STEP_SUMMARY)
    if markdown is not None and summary:
        check_writable(Path(summary).parent, f"${STEP_SUMMARY}={summary} (written with --specperf-markdown)")
    return json_path, markdown, bencher


def _ab(config: pytest.Config, *, other_target: bool) -> tuple[str, str] | None:
    """The two URLs of --specperf-ab, or None; they must differ and exclude an endpoint or engine."""
    ab = _raw(config, "specperf_ab")
    if ab is None:
        return None
    parts = [_check_url(u.strip(), "--specperf-ab", "http://a:8000,http://b:8000") for u in str(ab).split(",")]
    if len(parts) != 2:
        raise ConfigError(f"--specperf-ab={redact_text(str(ab))!r} needs two URLs, e.g. "
                          "--specperf-ab=http://a:8000,http://b:8000")
    if other_target:
        raise ConfigError("--specperf-ab measures its own two endpoints; drop --endpoint/--specperf-engine")
    if parts[0] == parts[1]:
        raise ConfigError(f"--specperf-ab names {redact_url(parts[0])} twice; A and B must be two different servers "
                          "(to judge one server against a saved run, use --specperf-compare)")
    return (parts[0], parts[1])


def _pairs(raw: str, flag: str, example: str) -> list[tuple[str, str]]:
    """``NAME=VALUE,NAME=VALUE`` into pairs; a name given twice or an item without ``=`` is a usage error."""
    out: list[tuple[str, str]] = []
    for item in (x.strip() for x in raw.split(",") if x.strip()):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise ConfigError(f"{flag}: {redact_text(item)!r} is not NAME=VALUE; give e.g. {flag}={example}")
        if name in (n for n, _ in out):
            raise ConfigError(f"{flag} names the arm {name!r} twice; give every arm its own name")
        out.append((name, value.strip()))
    return out


def _engine_arms(config: pytest.Config, engine: str | None, *, other: bool) -> tuple[int, ...] | None:
    """The speculative tokens of each engine arm (0: none), or None without --specperf-engine-arms."""
    raw = _raw(config, "specperf_engine_arms")
    if raw is None:
        return None
    if engine is None or other:
        raise ConfigError("--specperf-engine-arms starts its arms from --specperf-engine=llamacpp|vllm; give that, "
                          "and drop --specperf-arms/--specperf-ab")
    items = [x.strip().lower() for x in str(raw).split(",") if x.strip()]
    if not all(x in ("none", "0") or x.isdigit() for x in items):
        raise ConfigError(f"--specperf-engine-arms={raw!r}: each arm is none or a number of speculative tokens, "
                          "e.g. --specperf-engine-arms=none,2,4")
    ks = [0 if x == "none" else int(x) for x in items]
    if len(ks) < 2 or len(set(ks)) != len(ks):
        raise ConfigError(f"--specperf-engine-arms={raw!r} needs two or more different arms, e.g. none,2,4")
    return tuple(ks)


def _arms(config: pytest.Config, *, other_target: bool, engine_arms: tuple[int, ...] | None = None
          ) -> tuple[tuple[tuple[str, str], ...] | None, str | None, tuple[tuple[str, int], ...] | None]:
    """(arms, baseline arm, speculative tokens per arm) of --specperf-arms; None when not given. Engine arms
    have no URLs yet: their baseline and tokens come from --specperf-engine-arms."""
    raw = _raw(config, "specperf_arms")
    baseline = _raw(config, "specperf_arms_baseline")
    tokens_raw = _raw(config, "specperf_arms_tokens")
    if engine_arms is not None:
        names = [arm_name(k) for k in engine_arms]
        if baseline is not None and baseline not in names:
            raise ConfigError(f"--specperf-arms-baseline={baseline!r} is not an engine arm; use one of "
                              f"{', '.join(names)}")
        return None, baseline or names[0], tuple(zip(names, engine_arms, strict=True))
    if raw is None:
        for given, flag in ((baseline, "--specperf-arms-baseline"), (tokens_raw, "--specperf-arms-tokens")):
            if given is not None:
                raise ConfigError(f"{flag} needs --specperf-arms=NAME=URL,...; add it or drop {flag}")
        return None, None, None
    example = "off=http://a:8000,k2=http://b:8000,k4=http://c:8000"
    arms = [(n, _check_url(u, "--specperf-arms", example, n)) for n, u in _pairs(str(raw), "--specperf-arms", example)]
    if len(arms) < 2:
        raise ConfigError(f"--specperf-arms={redact_text(str(raw))!r} needs two or more arms, e.g. "
                          f"--specperf-arms={example}")
    if other_target:
        raise ConfigError("--specperf-arms measures its own endpoints; drop --endpoint/--specperf-engine/--specperf-ab")
    urls = [u for _, u in arms]
    twice = next((u for u in urls if urls.count(u) > 1), None)
    if twice is not None:
        raise ConfigError(f"--specperf-arms names {redact_url(twice)} for two arms; every arm must be its own server")
    names = [n for n, _ in arms]
    if baseline is not None and baseline not in names:
        raise ConfigError(f"--specperf-arms-baseline={baseline!r} is not an arm; use one of {', '.join(names)}")
    tokens = None
    if tokens_raw is not None:
        parsed = _pairs(str(tokens_raw), "--specperf-arms-tokens", "off=0,k2=2,k4=4")
        bad = next((n for n, _ in parsed if n not in names), None)
        if bad is not None:
            raise ConfigError(f"--specperf-arms-tokens names {bad!r}, which is not an arm; use {', '.join(names)}")
        if not all(v.isdigit() for _, v in parsed):
            raise ConfigError(f"--specperf-arms-tokens={tokens_raw!r}: each K must be a whole number >= 0 "
                              "(0: no speculation)")
        tokens = tuple((n, int(v)) for n, v in parsed)
    return tuple(arms), baseline or names[0], tokens


def _ab_trials(config: pytest.Config) -> int:
    trials = _number(config, "specperf_ab_trials", 5, 0.0)
    if trials != int(trials) or trials < 2:
        raise ConfigError(f"--specperf-ab-trials={trials:g} must be a whole number >= 2")
    return int(trials)


def _storage(config: pytest.Config, *, saving: bool) -> str:
    """The storage folder, checked writable when this run is saved."""
    storage = str(_raw(config, "specperf_storage") or ".specperf/runs")
    if saving:
        check_writable(config.rootpath / storage, f"--specperf-storage={storage} (where --specperf-save writes)")
    return storage


def _flag(config: pytest.Config, name: str) -> bool:
    raw = _raw(config, name)
    if raw is None:
        return False
    text = str(raw).strip().lower()
    if text in YES:
        return True
    if text in NO:
        return False
    raise ConfigError(f"{name} = {raw!r} is not a boolean; use true or false")


def _check_url(url: str, flag: str, example: str = "http://host:8000", name: str = "") -> str:
    """An http(s) URL without a trailing /v1 (its query kept: every request sends it); else a usage error whose
    example has the option's own shape, naming the URL with its credentials and query values masked."""
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parsed = urlsplit("")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        which = f"arm {name!r}: " if name else ""
        raise ConfigError(f"{flag}: {which}{redact_url(url)!r} is not an http(s) URL; give e.g. {flag}={example}")
    path = parsed.path.rstrip("/")
    return urlunsplit(parsed._replace(path=path.removesuffix("/v1") if path.endswith("/v1") else path))


def _path_option(config: pytest.Config, name: str) -> tuple[Path, str] | None:
    """(path, its option's flag) for a path option that was given, else None."""
    raw = _raw(config, name)
    return None if raw is None else (Path(raw), _option_flag(name))


def _out_file(config: pytest.Config, name: str) -> Path | None:
    given = _path_option(config, name)
    if given is None:
        return None
    path, flag = given
    if path.is_dir():
        raise ConfigError(f"{flag}={path} is a directory; give a file path, e.g. {flag}={path / EXAMPLE_FILES[name]}")
    check_writable(path.parent, f"{flag}={path}")  # now, not after the first case; a missing folder is created
    return path


#: a file name to suggest when a file option is given a folder
EXAMPLE_FILES = {"specperf_json": "results.json", "specperf_markdown": "summary.md", "specperf_bencher": "bencher.json",
                 "specperf_html": "report.html"}


def _engine_args(config: pytest.Config) -> tuple[str, ...]:
    raw = str(_raw(config, "specperf_engine_args") or "")
    try:
        return tuple(shlex.split(raw))
    except ValueError as exc:
        raise ConfigError(f"--specperf-engine-args={raw!r} is not valid shell quoting ({exc}); balance the quotes, "
                          "e.g. --specperf-engine-args='--threads 2'") from None


YES = ("true", "yes", "on", "1")
NO = ("false", "no", "off", "0")


def _run_name(config: pytest.Config, name: str) -> str | None:
    """--specperf-save / --specperf-compare: None (off), "" (automatic name / the latest) or a run name.

    The bare flag and the words true/yes/on/1 mean "" (so ini ``specperf_save = true`` does not save a run
    named "true"); false/no/off/0 mean off; anything else is the name.
    """
    flag = _option_flag(name)
    raw = config.getoption(name)
    if raw is None:
        raw = config.getini(name)
        if raw in ("", None, []):
            return None
    text = str(raw).strip()
    if text.lower() in YES or text == "":
        return ""
    if text.lower() in NO:
        return None
    if not slug(text):
        raise ConfigError(f"{flag}={text!r} has no letter or digit to name a run by; use e.g. {flag}=main")
    return text


def _out_dir(config: pytest.Config, name: str) -> Path | None:
    given = _path_option(config, name)
    if given is None:
        return None
    path, flag = given
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag}={path} is a file; give a folder (it is created if missing), e.g. {flag}=plots")
    check_writable(path, f"{flag}={path}")  # now: a run is never measured to find its output unwritable
    return path
