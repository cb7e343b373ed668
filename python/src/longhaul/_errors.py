"""The exceptions longhaul raises. The native core raises these classes, with the
messages the command line prints (the file, the key, what is wrong and what to write
instead)."""

from __future__ import annotations

from typing import Optional


class LonghaulError(Exception):
    """Anything longhaul raises."""


class ScenarioError(LonghaulError, ValueError):
    """A scenario, sweep or study that is not valid: the user's input.

    ``key`` is the dotted key at fault (``"topology.links.1.delay"``) when one is;
    ``path`` is the file (or the label of a scenario given as text or a dict).
    """

    def __init__(self, message: str, key: Optional[str] = None, path: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.key = key
        self.path = path


class OutputError(LonghaulError, OSError):
    """Results or a capture could not be written (the system, not the input)."""
