"""longhaul from Python: run the deterministic packet simulator in-process, get its
results as pandas DataFrames, and run sweeps on a process pool or a Ray cluster.

    >>> import longhaul
    >>> r = longhaul.run(longhaul.example())        # the built-in reference scenario
    >>> r.flows[["protocol", "goodput_mbps"]]
    >>> df = longhaul.sweep(longhaul.example(), {"topology.links.1.loss": [0.0, 1e-4]})

Everything is the command line's own code: a scenario run here gives the values
``longhaul sim run`` writes to ``summary.json`` for the same seed, and a sweep gives
the rows of its ``sweep.csv``. Errors are :class:`ScenarioError` (your input: the
message names the file and the key) or :class:`OutputError` (the system).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

from . import _longhaul
from ._errors import LonghaulError, OutputError, ScenarioError
from ._result import FLOW_COLUMNS, LINK_COLUMNS, SERIES_COLUMNS, TRACE_COLUMNS, Result
from ._source import Scenario, classify

__version__: str = _longhaul.__version__

__all__ = [
    "run", "sweep", "studies", "study", "example", "Result", "Study",
    "LonghaulError", "ScenarioError", "OutputError",
    "FLOW_COLUMNS", "LINK_COLUMNS", "SERIES_COLUMNS", "TRACE_COLUMNS",
]


def example() -> str:
    """The built-in reference scenario as TOML text (``longhaul sim example``): one TCP
    flow over a 1 Gb/s bottleneck, a starting point for your own."""
    return _longhaul.example()


def run(scenario: Scenario, seed: Optional[int] = None,
        outdir: Union[str, "os.PathLike[str]", None] = None) -> Result:
    """Runs one scenario and returns its :class:`Result`.

    ``scenario`` is a path to a scenario file, its TOML text (any string with a
    newline or ``=``), or a dict of the same schema. ``seed`` replaces the scenario's
    seed. With ``outdir``, the run also writes what ``longhaul sim run --out outdir``
    writes (summary.json, CSV series, plots, and the pcap captures the scenario asks
    for, see ``Result.pcap_paths``). The GIL is released while it runs, so runs in
    several threads use several cores.
    """
    source, kind, label = classify(scenario)
    out = os.fspath(outdir) if outdir is not None else None
    return Result(_longhaul.run(source, kind, label, seed, out))


def sweep(base: Scenario, grid: Optional[Dict[str, List[Any]]] = None, *,
          variants: Optional[List[Dict[str, Any]]] = None, name: Optional[str] = None,
          seed: Optional[int] = None, backend: str = "local",
          workers: Optional[int] = None, address: Optional[str] = None,
          progress: Optional[bool] = None):
    """Runs every point of a sweep and returns one DataFrame: the rows of the
    ``sweep.csv`` the command line writes (one row per point and flow; a column per
    grid key, ``variant`` first when there are variants).

    Either ``base`` is a ``sweep.toml`` (or ``*.sweep.toml``) file and ``grid`` and
    ``variants`` are left out, or ``base`` is a scenario (as for :func:`run`) and
    ``grid`` is what ``[grid]`` holds in a sweep file (dotted key -> list of values;
    ``"a.b, c.d"`` sets both keys) and ``variants`` what ``[[variant]]`` holds (dicts
    with a ``name`` and dotted-key edits). Points are the grid's cartesian product
    for each variant, as in ``sweep.toml``.

    ``backend="local"`` runs the points on a pool of ``workers`` processes (default:
    one per core; a script needs ``if __name__ == "__main__":`` around its top
    level, as for any spawned pool); ``backend="threads"`` on that many threads of
    this process (runs release the GIL); ``backend="ray"`` makes each point a Ray
    task, in the running Ray
    session, or one started with ``ray.init(address=address)``. Each point's seed is
    part of the point (``seed=`` replaces them all), so the DataFrame is the same on
    every backend. ``progress`` shows a tqdm bar (default: when there are 2+ points).
    """
    import pathlib

    if grid is None and variants is None and not isinstance(base, dict):
        source, kind, _ = classify(base, "sweep")
        if kind == "path" and pathlib.Path(source).name.endswith("sweep.toml"):
            spec = _longhaul.load_sweep(source, seed)
            return _run(spec, backend, workers, address, progress)
    import json

    source, kind, label = classify(base)
    try:
        grid_json = json.dumps(grid or {}, allow_nan=False)
        variants_json = json.dumps(variants or [], allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"<sweep>: grid and variants: {e}", "grid", "<sweep>") from None
    spec = _longhaul.make_sweep(source, kind, label, grid_json, variants_json, name, seed)
    return _run(spec, backend, workers, address, progress)


def _run(spec, backend, workers, address, progress):
    from . import _sweep

    df, _ = _sweep.run(spec, backend, workers, address, progress)
    return df


class Study(dict):
    """A study's tables: sweep name -> DataFrame (its ``sweep.csv``). ``outdir`` is
    the results folder, with the study's results.md and plots as the command line
    writes them."""

    outdir: str

    def __init__(self, tables: Dict[str, Any], outdir: str):
        super().__init__(tables)
        self.outdir = outdir


def studies() -> Dict[str, str]:
    """The built-in studies (the repository's ``studies/``), name -> title."""
    return dict(_longhaul.studies())


def study(name: str, outdir: Union[str, "os.PathLike[str]", None] = None,
          jobs: Optional[int] = None, seed: Optional[int] = None) -> Study:
    """Runs a built-in study as ``longhaul sim run studies/<name>`` does, into
    ``outdir`` (default ``results/<name>``), on ``jobs`` threads (default: all
    cores), and returns its tables. ``seed`` replaces every run's seed."""
    import pandas as pd

    out = os.fspath(outdir) if outdir is not None else os.path.join("results", name)
    folders = _longhaul.run_study(name, out, jobs, seed)
    tables = {}
    for sweep_name, folder in folders:
        csv = os.path.join(folder, "sweep.csv")
        tables[sweep_name] = pd.read_csv(csv) if os.path.exists(csv) else None
    return Study(tables, out)
