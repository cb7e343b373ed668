"""How a scenario may be given: a path, TOML text, or a dict of the same schema."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple, Union

Scenario = Union[str, "os.PathLike[str]", Dict[str, Any]]


def classify(scenario: Scenario, what: str = "scenario") -> Tuple[str, str, str]:
    """(source, kind, label) for the native core: a dict is sent as JSON, a path-like
    object or a string without a newline or ``=`` is a file, any other string is TOML
    text."""
    if isinstance(scenario, dict):
        try:
            text = json.dumps(scenario, allow_nan=False)
        except (TypeError, ValueError) as e:
            from ._errors import ScenarioError

            raise ScenarioError(
                f"<dict>: {e}; a {what} dict may hold only strings, numbers, booleans, "
                "lists and dicts (write durations and rates as strings, '10ms', '1Gbps')",
                None, "<dict>") from None
        return text, "json", "<dict>"
    if isinstance(scenario, os.PathLike):
        path = os.fspath(scenario)
        return path, "path", path
    if isinstance(scenario, str):
        if "\n" in scenario or "=" in scenario:
            return scenario, "toml", "<toml>"
        return scenario, "path", scenario
    raise TypeError(
        f"a {what} is a path, TOML text or a dict, not {type(scenario).__name__}")
