"""Exceptions with one-line messages that say what was wrong and what to do."""

from __future__ import annotations


class SpecperfError(Exception):
    """Base class: the message is one line, meant to be shown to the user as it is."""


class ConfigError(SpecperfError):
    """The user's input (an option, a marker, a YAML case, a profile) is wrong."""


class MeasurementError(SpecperfError):
    """The endpoint could not be measured (down, stream cut, output too short, ...).

    A case that raises this is an error, never a pass and never a perf failure.
    """


def shorten(text: str, limit: int = 120) -> str:
    """Quote a piece of server output on one line, cut to ``limit`` characters."""
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."
