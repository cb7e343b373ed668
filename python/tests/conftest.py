"""Fixtures: the command-line tool these tests hold the Python front to, and small
scenarios."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Three protocols over one 100 Mb/s x 10 ms bottleneck with random loss, 4 s: small
# enough to run in a fraction of a second, rich enough that every kind of column shows.
SMALL = """
name = "small"
duration = "4s"
seed = 5
sample_interval = "500ms"

[topology]
kind = "chain"

[[topology.links]]
rate = "1Gbps"
delay = "0ms"

[[topology.links]]
rate = "100Mbps"
delay = "10ms"
queue = "1bdp"
loss = 1e-4

[[flow]]
protocol = "tcp"
cc = "cubic"

[[flow]]
protocol = "udt"
start = "1s"

[[flow]]
protocol = "udp"
rate = "5Mbps"
packet_size = 1000

[outputs]
trace = true
trace_interval = "100ms"
"""


@pytest.fixture(scope="session")
def cli() -> str:
    """The `longhaul` binary: $LONGHAUL_BIN, or the workspace's release build, brought
    up to date here (a stale binary would compare against old code; never skipped)."""
    if os.environ.get("LONGHAUL_BIN"):
        return os.environ["LONGHAUL_BIN"]
    subprocess.run(["cargo", "build", "--release", "-p", "longhaul"], cwd=REPO, check=True)
    return str(REPO / "target" / "release" / "longhaul")


@pytest.fixture
def small(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def cli_run(cli: str, *args: str) -> None:
    subprocess.run([cli, "sim", "run", *args, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
