"""The endpoint a run measures: a given URL, the embedded simulator, or a local engine, started lazily."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_specperf.endpoint.client import Client, Progress
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.files import write_text_atomic
from pytest_specperf.run.runner import Runner
from pytest_specperf.scale.pool import senders_for
from pytest_specperf.settings import Settings

if TYPE_CHECKING:
    from pytest_specperf.engines.process import EngineProcess
    from pytest_specperf.sim import SimServer

# Perf cases against the local CPU engine run sized down (max ctx, max tokens, max floor in tok/s):
# prefill of a 135M model on 2 cores is ~110 tok/s, so a 5000-token prompt would take most of a
# minute, and floors written for GPU deployments say nothing about 2 CPU cores.
ENGINE_SIZE = (256, 320, 5.0)


class EndpointSession:
    """Owns what this process started (simulator or engine) and the client and runner over it."""

    def __init__(self, settings: Settings, *, url: str | None = None, model: str | None = None,
                 source: str = "--endpoint", shared: Path | None = None, engine_arm: int | None = None) -> None:
        self.settings = settings
        self._engine_arm = engine_arm  # --specperf-engine-arms: this engine's speculative tokens (0: none)
        self._given_url = url or settings.endpoint
        self._given_model = model or settings.model
        self._source = source  # the option that named the URL, for error hints
        self._shared = shared  # xdist worker: the controller starts the endpoint when asked here
        self._server: EngineProcess | SimServer | None = None
        self.started = ""  # what this session started: "", "sim:<profile>", "engine:llamacpp", "engine:vllm"
        self._client: Client | None = None
        self._runner: Runner | None = None
        self.progress: Any = None
        self._start_error: ConfigError | MeasurementError | None = None

    @property
    def url(self) -> str:
        """The endpoint URL, starting the simulator or engine on first use."""
        if self._given_url is None:
            if self._start_error is not None:
                raise self._start_error  # one failed start is enough: every case reports the same reason
            try:
                if self._shared is not None:
                    self._given_url, model = ask_controller(self._shared)
                    self._given_model = self._given_model or model
                else:
                    self._start()
            except (ConfigError, MeasurementError) as exc:
                self._start_error = exc
                raise
        assert self._given_url is not None
        return self._given_url

    @property
    def given_url(self) -> str | None:
        """The URL without starting anything (None: a simulator or engine would be started on first use)."""
        return self._given_url

    @property
    def model(self) -> str | None:
        """The model name to send (None: the first one served)."""
        return self._given_model

    def _start(self) -> None:
        s = self.settings
        if s.engine in ("llamacpp", "vllm"):
            from pytest_specperf.engines.process import EngineError, EngineNotFound

            preset, args = engine_arm_args(s.engine, self._engine_arm, s.engine_preset, s.engine_args)
            server: Any = _engine_class(s.engine)(s.engine_model, preset=preset, extra_args=args)
            try:
                server.start()
            except EngineNotFound as exc:
                raise ConfigError(str(exc)) from None
            except EngineError as exc:
                raise MeasurementError(str(exc)) from None
            arm = arm_name(self._engine_arm) if self._engine_arm is not None else preset
            self.started = f"engine:{s.engine} ({arm})"
        else:
            from pytest_specperf.sim import SimServer, SimStartError

            server = SimServer(s.sim, speed=s.sim_speed)
            try:
                server.start()
            except SimStartError as exc:
                raise MeasurementError(f"the embedded simulator did not start: {exc}") from None
            except ValueError as exc:
                raise ConfigError(f"--specperf-sim={s.sim}: {exc}") from None
            self.started = f"sim:{s.sim}" + (f" x{s.sim_speed:g}" if s.sim_speed != 1 else "")
        self._server = server
        self._given_url = server.url

    @property
    def client(self) -> Client:
        """The client (detects the server on first use)."""
        if self._client is None:
            s = self.settings
            url = self.url
            self._client = Client(url, model=self._given_model, api_key=s.api_key, timeout=s.timeout,
                                  source=self._source)
            self._client.detect()
        return self._client

    @property
    def runner(self) -> Runner:
        """The case runner over this endpoint."""
        if self._runner is None:
            client = self.client  # starts the engine if this session owns one
            cap = ENGINE_SIZE if self.started.startswith("engine:") else None
            self._runner = Runner(client, max_drift=self.settings.max_drift, inconclusive=self.settings.inconclusive,
                                  progress=self._progress_for,
                                  size_cap=cap, senders=senders_for(self.settings.workers, self.settings.hosts))
        return self._runner

    def _progress_for(self, nodeid: str) -> Progress | None:
        return self.progress(nodeid) if self.progress else None

    def describe(self) -> dict[str, Any]:
        """What the `endpoint` fixture shows: URL, model, server kind and what it supports."""
        c = self.client
        info = c.info
        assert info is not None
        return {"url": c.url, "model": c.model, "server": info.kind, "started": self.started, **info.as_dict()}

    def log_tail(self) -> str:
        """The tail of a started engine's log ('' for others), shown when a case errors."""
        tail = getattr(self._server, "log_tail", None)
        return tail() if callable(tail) else ""

    def close(self) -> None:
        """Stop what this session started."""
        if self._runner is not None:
            self._runner.context.senders.close()  # its worker processes, here and on other hosts
        if self._client is not None:
            self._client.close()
        if self._server is not None:
            try:
                self._server.stop()
            finally:
                self._server = None



def arm_name(k: int) -> str:
    """The name of an engine arm with ``k`` speculative tokens: "none" for 0, else "k<K>"."""
    return "none" if k == 0 else f"k{k}"


def _engine_class(engine: str) -> type[Any]:
    """The server class of a local engine (imported on first use: a run on an endpoint loads neither)."""
    if engine == "llamacpp":
        from pytest_specperf.engines.llamacpp import LlamaServer

        return LlamaServer
    from pytest_specperf.engines.vllm import VllmServer

    return VllmServer


def engine_arm_args(engine: str, k: int | None, preset: str, extra: tuple[str, ...]) -> tuple[str, list[str]]:
    """(preset, extra arguments) of one engine arm (``--specperf-engine-arms``); unchanged when ``k`` is None.

    0 is no speculation. Otherwise llama.cpp drafts with the model itself (``self-draft``: the one preset whose
    draft length is a number) with ``--spec-draft-n-max K`` (the current name of ``--draft-max``); vLLM runs its
    ngram preset with ``num_speculative_tokens`` K. The arm's arguments come last, so they win over the preset's.
    """
    if k is None:
        return preset, list(extra)
    if k == 0:
        return "none", list(extra)
    if engine == "llamacpp":
        return "self-draft", [*extra, "--spec-draft-n-max", str(k), "--spec-draft-n-min", "0"]
    from pytest_specperf.engines.vllm import SPEC_CONFIG

    return "ngram", [*extra, "--speculative-config", json.dumps({**SPEC_CONFIG, "num_speculative_tokens": k})]


# -- xdist: one endpoint for all workers, started only when one of them needs it ---------------------------------

ANSWER = "endpoint.json"
ASK = "needed"
SHARED_START_TIMEOUT_S = 900.0  # covers building nothing, but loading a model on a slow host


class SharedStart:
    """The controller's side: starts its session's endpoint the first time a worker asks (a file in ``folder``).

    Workers collect and run the tests, so only they know whether a perf case runs at all; a run without one
    never starts a simulator or engine. The controller owns what it starts and stops it at the end.
    """

    def __init__(self, session: EndpointSession) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="specperf-shared-"))
        self._session = session
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="specperf-shared-start", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.wait(0.05):
            if (self.folder / ASK).exists():
                try:
                    answer: dict[str, Any] = {"url": self._session.url, "model": self._session.model}
                except (ConfigError, MeasurementError) as exc:
                    answer = {"error": str(exc), "config": isinstance(exc, ConfigError)}
                write_text_atomic(self.folder / ANSWER, json.dumps(answer))
                return

    def close(self) -> None:
        """Stop answering (waits for a start under way, so the session can then stop it) and clean up."""
        self._stop.set()
        self._thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)


def ask_controller(folder: Path, timeout: float = SHARED_START_TIMEOUT_S) -> tuple[str, str | None]:
    """The worker's side: ask the controller to start the endpoint; (url, model) or its start error."""
    answer = folder / ANSWER
    if not answer.exists():
        (folder / ASK).touch()
        deadline = time.monotonic() + timeout
        while not answer.exists():
            if time.monotonic() > deadline:
                raise MeasurementError(f"the shared endpoint did not start within {timeout:g} s")
            time.sleep(0.05)
    data = json.loads(answer.read_text(encoding="utf-8"))
    if "error" in data:
        raise (ConfigError if data.get("config") else MeasurementError)(data["error"])  # not result data
    return str(data["url"]), data.get("model")  # not result data: the controller's answer file
