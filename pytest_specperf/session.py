"""The endpoint a run measures: a given URL, the embedded simulator, or a local engine, started lazily."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from .client import Client, Progress
from .errors import ConfigError, MeasurementError
from .options import Settings
from .runner import Runner

# Perf cases against the local CPU engine run sized down (max ctx, max tokens, max floor in tok/s):
# prefill of a 135M model on 2 cores is ~110 tok/s, so a 5000-token prompt would take most of a
# minute, and floors written for GPU deployments say nothing about 2 CPU cores.
ENGINE_SIZE = (256, 320, 5.0)


class EndpointSession:
    """Owns what this process started (simulator or engine) and the client and runner over it."""

    def __init__(self, settings: Settings, *, url: str | None = None, model: str | None = None) -> None:
        self.settings = settings
        self._given_url = url or settings.endpoint
        self._given_model = model or settings.model
        self._server: AbstractContextManager[Any] | None = None
        self.started = ""  # what this session started: "", "sim:<profile>", "engine:llamacpp"
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
                self._start()
            except (ConfigError, MeasurementError) as exc:
                self._start_error = exc
                raise
        assert self._given_url is not None
        return self._given_url

    @property
    def model(self) -> str | None:
        """The model name to send (None: the first one served)."""
        return self._given_model

    def _start(self) -> None:
        s = self.settings
        if s.engine == "llamacpp":
            from .engines.llamacpp import EngineError, EngineNotFound, LlamaServer

            server: Any = LlamaServer(s.engine_model, preset=s.engine_preset, extra_args=s.engine_args)
            try:
                server.start()
            except EngineNotFound as exc:
                raise ConfigError(str(exc)) from None
            except EngineError as exc:
                raise MeasurementError(str(exc)) from None
            self.started = f"engine:llamacpp ({s.engine_preset})"
        else:
            from .sim import SimServer, SimStartError

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
            self._client = Client(self.url, model=self._given_model, api_key=s.api_key, timeout=s.timeout)
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
                                  size_cap=cap)
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
        if self._client is not None:
            self._client.close()
        if self._server is not None:
            try:
                self._server.stop()
            finally:
                self._server = None

