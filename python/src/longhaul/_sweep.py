"""Sweeps on a backend: a process pool here, or Ray tasks on a cluster.

The native core expands the sweep (the parser of ``sweep.toml``) into points, each a
self-contained document; a backend runs each point wherever it likes and hands back
its lines of ``sweep.csv``; they are put together in point order. Each point's seed is
in its document (the base scenario's seed, the grid's ``seed`` key, or ``seed=``), so
the table is the same on every backend and with any number of workers.
"""

from __future__ import annotations

import io
import json
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _longhaul

# (point index, params JSON, document JSON, label, warm-up seconds, seed override)
Task = Tuple[int, str, str, str, float, Optional[int]]


def run_point(task: Task) -> Tuple[int, str]:
    """Runs one point; returns (index, its lines of sweep.csv). Module-level so a
    process pool and Ray can ship it by name."""
    n, params, doc, label, warmup, seed = task
    return n, _longhaul.run_point(n, params, doc, label, warmup, seed)


def tasks(spec: Dict[str, Any]) -> List[Task]:
    return [(n, p, d, label, spec["warmup_s"], spec["seed"])
            for n, (p, d, label) in enumerate(spec["points"])]


def _bar(total: int, progress: Optional[bool], desc: str):
    show = progress if progress is not None else total > 1
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="run")


def _workers(workers: Optional[int], n: int) -> int:
    return max(1, min(workers or os.cpu_count() or 1, n or 1))


def _gather(futures, bar) -> Dict[int, str]:
    out: Dict[int, str] = {}
    for f in as_completed(futures):
        n, rows = f.result()
        out[n] = rows
        if bar is not None:
            bar.update(1)
    return out


def run_local(todo: Sequence[Task], workers: Optional[int], bar) -> Dict[int, str]:
    """A pool of processes, spawned (not forked), so it is safe whatever threads the
    caller runs; a script must then guard its top level with
    ``if __name__ == "__main__":``, as for any spawned pool."""
    try:
        with ProcessPoolExecutor(max_workers=_workers(workers, len(todo)),
                                 mp_context=get_context("spawn")) as pool:
            return _gather([pool.submit(run_point, t) for t in todo], bar)
    except BrokenProcessPool as e:
        raise RuntimeError(
            "a worker process of backend='local' died. If this is a script, put its "
            "top level under `if __name__ == \"__main__\":` (each worker process "
            "imports the script again), or use backend='threads'") from e


def run_threads(todo: Sequence[Task], workers: Optional[int], bar) -> Dict[int, str]:
    """A pool of threads in this process: runs release the GIL, so they use as many
    cores as there are threads, without starting processes."""
    with ThreadPoolExecutor(max_workers=_workers(workers, len(todo))) as pool:
        return _gather([pool.submit(run_point, t) for t in todo], bar)


def run_ray(todo: Sequence[Task], address: Optional[str], bar) -> Dict[int, str]:
    """One Ray task per point. Uses the running Ray session if there is one, else
    connects to ``address`` (None: a local one). Every node needs this package
    installed (``pip install ./python[ray]``)."""
    try:
        import ray
    except ImportError:
        raise ImportError(
            "backend='ray' needs Ray: pip install 'longhaul[ray]' (or pip install ray)"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(run_point)
    pending = [remote.remote(t) for t in todo]
    out: Dict[int, str] = {}
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            n, rows = ray.get(ref)
            out[n] = rows
            if bar is not None:
                bar.update(1)
    return out



def run(spec: Dict[str, Any], backend: str, workers: Optional[int], address: Optional[str],
        progress: Optional[bool]):
    import pandas as pd

    todo = tasks(spec)
    bar = _bar(len(todo), progress, spec["name"])
    try:
        if backend == "local":
            rows = run_local(todo, workers, bar)
        elif backend == "threads":
            rows = run_threads(todo, workers, bar)
        elif backend == "ray":
            rows = run_ray(todo, address, bar)
        else:
            raise ValueError(f"backend={backend!r}: use 'local' (a process pool), 'threads' or 'ray'")
    finally:
        if bar is not None:
            bar.close()
    text = spec["header"] + "".join(rows[n] for n in range(len(todo)))
    df = pd.read_csv(io.StringIO(text))
    df.attrs["sweep"] = spec["name"]
    df.attrs["params"] = [k for k, _ in json.loads(spec["points"][0][0])] if todo else []
    return df, text
