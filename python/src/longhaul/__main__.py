"""``python -m longhaul``: sweeps on a backend of your choice from the shell.

    python -m longhaul sweep studies/ar-udt/sweep.toml --backend ray --address auto -o sweep.csv
    python -m longhaul studies
    python -m longhaul study sctp-slow-start --out results/sctp

``sweep`` writes the sweep's ``sweep.csv`` (the bytes ``longhaul sim run`` writes) to
``--out`` or standard output. Bad input exits with status 2 and says what is wrong.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m longhaul", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a sweep.toml on a backend; print its sweep.csv")
    s.add_argument("path", help="a sweep.toml or *.sweep.toml")
    s.add_argument("--backend", choices=["local", "threads", "ray"], default="local")
    s.add_argument("--address", help="Ray cluster address (default: start a local one)")
    s.add_argument("--workers", type=int, help="processes or threads (default: one per core)")
    s.add_argument("--seed", type=int, help="run every point with this seed")
    s.add_argument("-o", "--out", help="write sweep.csv here (default: standard output)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sub.add_parser("studies", help="list the built-in studies")
    st = sub.add_parser("study", help="run a built-in study as `longhaul sim run studies/NAME`")
    st.add_argument("name")
    st.add_argument("--out", help="results folder (default: results/NAME)")
    st.add_argument("--jobs", type=int, help="threads (default: one per core)")
    st.add_argument("--seed", type=int)
    a = p.parse_args(argv)

    import longhaul
    from longhaul import _longhaul, _sweep

    try:
        if a.command == "studies":
            for name, title in longhaul.studies().items():
                print(f"{name:<20} {title}")
        elif a.command == "study":
            result = longhaul.study(a.name, a.out, a.jobs, a.seed)
            print(f"results: {result.outdir}")
        else:
            spec = _longhaul.load_sweep(a.path, a.seed)
            _, text = _sweep.run(spec, a.backend, a.workers, a.address,
                                 False if a.quiet else None)
            if a.out:
                with open(a.out, "w") as f:
                    f.write(text)
            else:
                sys.stdout.write(text)
    except longhaul.ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except longhaul.LonghaulError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
