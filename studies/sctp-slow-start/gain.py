#!/usr/bin/env python3
"""SCTP's transfer-time gain over TCP in every cell of the paper's Figs. 12-15, and
their mean (the paper's "about 15 %").

    python3 studies/sctp-slow-start/gain.py results/sctp-slow-start

reads each sweep's sweep.csv (columns written by `longhaul sim run`) and prints, per
grid point, (TCP - SCTP) / TCP in percent, for the `sctp` and `sctp-late-data`
variants, then the means over the paper's quantitative cells (Figs. 12-13) and over
all cells."""

import csv
import sys
from pathlib import Path

FIGS = {"delay": "Fig. 12", "bandwidth": "Fig. 13", "size-100kbps": "Fig. 14", "size-10mbps": "Fig. 15"}
FIXED = {"point", "variant", "flow", "protocol", "goodput_mbps", "delivered_bytes",
         "completion_time_s", "retransmits", "timeouts", "goodput_cv",
         "transfer_time_s", "first_round_bytes"}


def main(root: Path) -> None:
    cells = {"sctp": [], "sctp-late-data": []}
    for sweep, fig in FIGS.items():
        path = root / sweep / "sweep.csv"
        if not path.exists():
            sys.exit(f"{path}: not found; run `longhaul sim run studies/sctp-slow-start` first")
        rows = list(csv.DictReader(path.open()))
        keys = [k for k in rows[0] if k not in FIXED]
        by_point = {}
        for r in rows:
            point = ", ".join(f"{k.split('.')[-1]}={r[k]}" for k in keys)
            by_point.setdefault(point, {})[r["variant"]] = float(r["transfer_time_s"])
        for point, t in by_point.items():
            line = f"{fig:8} {point:45}"
            for v in cells:
                g = (t["tcp"] - t[v]) / t["tcp"] * 100
                cells[v].append((fig, g))
                line += f"  {v} {g:6.1f} %"
            print(line)
    for v, gains in cells.items():
        quantitative = [g for f, g in gains if f in ("Fig. 12", "Fig. 13")]
        print(f"{v}: mean over Figs. 12-13 {sum(quantitative) / len(quantitative):.1f} %, "
              f"over all {len(gains)} cells {sum(g for _, g in gains) / len(gains):.1f} %")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/sctp-slow-start"))
