"""What a run returns: the summary and the series as pandas DataFrames."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pandas as pd

# The columns of `Result.flows`, with their dtypes. Every flow has the first block;
# the others are reported by some protocols only (see summary.json in the docs), and
# a column is there when any flow of the run has it, with missing values as
# <NA> (nullable integers) or NaN (floats). One definition of these lives in the
# simulator (`FlowSummary`); a test checks this table against what it writes.
FLOW_COLUMNS: Dict[str, str] = {
    "id": "int64",
    "protocol": "object",
    "from": "object",
    "to": "object",
    "start_s": "float64",
    "delivered_bytes": "int64",
    "goodput_mbps": "float64",
    # Optional:
    "completion_time_s": "float64",
    "cc": "object",
    "retransmits": "Int64",
    "timeouts": "Int64",
    "fast_recoveries": "Int64",
    "data_segments_sent": "Int64",
    "srtt_ms": "float64",
    "min_rtt_ms": "float64",
    "sent_pkts": "Int64",
    "received_pkts": "Int64",
    "loss_rate": "float64",
    "mean_delay_ms": "float64",
    "max_delay_ms": "float64",
    "jitter_ms": "float64",
    "naks": "Int64",
    "ar_udt_classes": "object",
    "local_retransmits": "Int64",
    "suppressed_dupacks": "Int64",
    "snoop_rtt_ms": "float64",
    "snoop_rto_ms": "float64",
    "transfer_time_s": "float64",
    "round_bytes": "object",
}
FLOW_REQUIRED = ["id", "protocol", "from", "to", "start_s", "delivered_bytes", "goodput_mbps"]

# The columns of `Result.links`, likewise.
LINK_COLUMNS: Dict[str, str] = {
    "name": "object",
    "from": "object",
    "to": "object",
    "rate_mbps": "float64",
    "delay_ms": "float64",
    "utilisation": "float64",
    "delivered_pkts": "int64",
    "delivered_bytes": "int64",
    "drops_queue": "int64",
    "drops_loss": "int64",
    "drops_policed": "int64",
    "mean_queue_waiting_pkts": "float64",
    "max_queue_pkts": "int64",
    # Left out of summary.json when zero; 0 here:
    "drops_red": "int64",
    "drops_af": "object",
}
LINK_REQUIRED = list(LINK_COLUMNS)  # every column, the optional ones as 0

# `Result.series`: one row per sample, long format.
SERIES_COLUMNS: Dict[str, str] = {
    "time_s": "float64",
    "kind": "object",  # "flow" or "link"
    "name": "object",  # the flow's index as text, or the link direction's name
    "metric": "object",  # goodput_mbps (flows); throughput_mbps, queue_pkts (links)
    "value": "float64",
}

# `Result.trace`: the cwnd/RTT trace a scenario asks for with `[outputs] trace`.
TRACE_COLUMNS: Dict[str, str] = {
    "time_s": "float64",
    "flow": "int64",
    "cwnd_bytes": "int64",
    "ssthresh_bytes": "Int64",  # <NA> before the first loss
    "srtt_ms": "float64",
    "in_flight_bytes": "int64",
    "delivered_bytes": "int64",
    "send_period_us": "float64",
    "recv_rate_pps": "int64",
    "bandwidth_pps": "int64",
}


def _frame(rows: List[Dict[str, Any]], columns: Dict[str, str], required: List[str],
           defaults: Optional[Dict[str, Any]] = None) -> pd.DataFrame:
    present = [c for c in columns if c in required or any(c in r for r in rows)]
    for r in rows:
        for k in r:
            if k not in columns:
                raise RuntimeError(
                    f"longhaul: the simulator reported {k!r}, which this package does not know; "
                    "the native core and the Python files are from different versions")
    defaults = defaults or {}
    data = {c: [r.get(c, defaults.get(c)) for r in rows] for c in present}
    return pd.DataFrame({c: pd.Series(data[c], dtype=columns[c]) for c in present},
                        columns=present)


class Result:
    """The results of one run.

    - ``summary``: dict, the values of ``summary.json``.
    - ``flows``: one row per flow (columns: ``FLOW_COLUMNS``).
    - ``links``: one row per link direction (``LINK_COLUMNS``).
    - ``series``: the sampled time series, long format (``SERIES_COLUMNS``).
    - ``trace``: the cwnd/RTT trace when the scenario asked for one (``TRACE_COLUMNS``).
    - ``outdir``: the results folder when ``run(..., outdir=...)`` wrote one, else None.
    - ``pcap_paths``: link direction to capture file, for the captures the scenario
      asks for (written only with ``outdir``); ``pcap_path`` is the first of them.
    """

    def __init__(self, raw: Dict[str, Any]):
        self._raw = raw
        self.summary: Dict[str, Any] = json.loads(raw["summary"])
        self.outdir: Optional[str] = raw["outdir"]
        self.pcap_paths: Dict[str, str] = dict(raw["pcap"])
        self._flows: Optional[pd.DataFrame] = None
        self._links: Optional[pd.DataFrame] = None
        self._series: Optional[pd.DataFrame] = None
        self._trace: Optional[pd.DataFrame] = None

    @property
    def pcap_path(self) -> Optional[str]:
        return next(iter(self.pcap_paths.values()), None)

    @property
    def flows(self) -> pd.DataFrame:
        if self._flows is None:
            self._flows = _frame(self.summary["flows"], FLOW_COLUMNS, FLOW_REQUIRED)
        return self._flows

    @property
    def links(self) -> pd.DataFrame:
        if self._links is None:
            self._links = _frame(self.summary["links"], LINK_COLUMNS, LINK_REQUIRED,
                                 {"drops_red": 0, "drops_af": [0, 0, 0]})
        return self._links

    @property
    def series(self) -> pd.DataFrame:
        if self._series is None:
            raw = self._raw
            times = raw["times"]
            parts = []
            for i, s in enumerate(raw["flow_goodput"]):
                parts.append(("flow", str(i), "goodput_mbps", s))
            for name, tput, queue in zip(raw["link_names"], raw["link_throughput"],
                                         raw["link_queue"]):
                parts.append(("link", name, "throughput_mbps", tput))
                parts.append(("link", name, "queue_pkts", queue))
            cols: Dict[str, list] = {c: [] for c in SERIES_COLUMNS}
            for kind, name, metric, values in parts:
                n = len(values)
                cols["time_s"].extend(times[:n])
                cols["kind"].extend([kind] * n)
                cols["name"].extend([name] * n)
                cols["metric"].extend([metric] * n)
                cols["value"].extend(values)
            self._series = pd.DataFrame(
                {c: pd.Series(v, dtype=SERIES_COLUMNS[c]) for c, v in cols.items()})
        return self._series

    @property
    def trace(self) -> pd.DataFrame:
        if self._trace is None:
            rows = self._raw["trace"]
            cols = list(TRACE_COLUMNS)
            self._trace = pd.DataFrame(
                {c: pd.Series([r[i] for r in rows], dtype=TRACE_COLUMNS[c])
                 for i, c in enumerate(cols)}, columns=cols)
        return self._trace

    def __repr__(self) -> str:
        flows = ", ".join(f"{f['protocol']} {f['goodput_mbps']:.1f} Mb/s"
                          for f in self.summary["flows"][:4])
        more = "" if len(self.summary["flows"]) <= 4 else ", ..."
        return f"<longhaul.Result {self.summary['scenario']!r}: {flows}{more}>"
