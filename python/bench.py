"""The Python front's cost against the CLI, and sweeps on each backend: a benchmark
that prints figures (not a test). Run from the repository root after
`pip install ./python[ray]` and `cargo build --release`:

    python3 python/bench.py [--reps 3] [--sweep studies/ar-udt/sweep.toml]

Runs alternate (CLI, Python, CLI, ...) so drift hits both alike; figures are medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import longhaul

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "target" / "release" / "longhaul"


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sweep", default=str(REPO / "studies" / "ar-udt" / "sweep.toml"))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    ref = tmp / "reference.toml"
    ref.write_text(longhaul.example())

    # 1. One scenario: the CLI process against a call from Python, same outputs.
    cli, py_out, py_mem, py_proc = [], [], [], []
    for i in range(a.reps):
        cli.append(timed(lambda: subprocess.run(
            [str(CLI), "sim", "run", str(ref), "--out", str(tmp / "cli"), "--quiet"], check=True)))
        py_out.append(timed(lambda: longhaul.run(ref, outdir=tmp / "py")))
        py_mem.append(timed(lambda: longhaul.run(ref)))
        py_proc.append(timed(lambda: subprocess.run(
            [sys.executable, "-c", f"import longhaul; longhaul.run({str(ref)!r}, outdir={str(tmp / 'pp')!r})"],
            check=True)))
    m = statistics.median
    print(f"one scenario (reference, 60 s simulated), median of {a.reps}:")
    print(f"  CLI `sim run --out`                      {m(cli):7.3f} s")
    print(f"  longhaul.run(outdir=...) in-process      {m(py_out):7.3f} s  ({m(py_out) / m(cli):.2f}x CLI)")
    print(f"  longhaul.run() in memory                 {m(py_mem):7.3f} s  ({m(py_mem) / m(cli):.2f}x CLI)")
    print(f"  python -c 'import longhaul; run(...)'    {m(py_proc):7.3f} s  ({m(py_proc) / m(cli):.2f}x CLI)")

    # 2. Two runs in two threads against one run (the GIL is released).
    one = m([timed(lambda: longhaul.run(ref)) for _ in range(a.reps)])

    def two():
        ts = [threading.Thread(target=longhaul.run, args=(ref,)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    both = m([timed(two) for _ in range(a.reps)])
    print(f"two runs in two threads: {both:.3f} s against one run {one:.3f} s "
          f"({both / one:.2f}x; 2.00x would mean the GIL serialised them)")

    # 3. A sweep on each backend, and the CLI on the same sweep.
    n = len(longhaul._longhaul.load_sweep(a.sweep)["points"])
    print(f"sweep {a.sweep} ({n} points):")
    t = timed(lambda: subprocess.run([str(CLI), "sim", "run", a.sweep, "--out",
                                      str(tmp / "sw"), "--quiet"], check=True))
    print(f"  CLI `sim run` (rayon, all cores)       {t:7.1f} s")
    for backend in ("local", "threads"):
        t = timed(lambda: longhaul.sweep(a.sweep, backend=backend, progress=False))
        print(f"  backend={backend!r:<10}                   {t:7.1f} s")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    t = timed(lambda: longhaul.sweep(a.sweep, backend="ray", progress=False))
    print(f"  backend='ray' (local, num_cpus=2)      {t:7.1f} s")
    ray.shutdown()


if __name__ == "__main__":
    main()
