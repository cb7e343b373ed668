"""`longhaul.sweep`: the CLI's sweep.csv, the same table on every backend."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import longhaul
from conftest import SMALL, cli_run

# 2 variants x 2 losses x 2 seeds = 8 points.
GRID = {"topology.links.1.loss": [0.0, 1e-3], "seed": [1, 2]}
VARIANTS = [
    {"name": "cubic", "flow.0": {"protocol": "tcp", "cc": "cubic"}},
    {"name": "udt", "flow.0": {"protocol": "udt"}},
]
SWEEP_TOML = """
scenario = "base.toml"
[grid]
"topology.links.1.loss" = [0.0, 1e-3]
seed = [1, 2]
[[variant]]
name = "cubic"
"flow.0" = { protocol = "tcp", cc = "cubic" }
[[variant]]
name = "udt"
"flow.0" = { protocol = "udt" }
"""


def _base() -> dict:
    doc = tomllib.loads(SMALL)
    doc["flow"] = doc["flow"][:1]  # one flow: the variants replace it
    del doc["outputs"]
    return doc


def _write_base(path) -> None:
    # The base as TOML text: SMALL with its first flow only and no outputs.
    parts = SMALL.split("[[flow]]")
    path.write_text(parts[0] + "[[flow]]" + parts[1])


@pytest.fixture(scope="module")
def cli_sweep(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    _write_base(d / "base.toml")
    (d / "sweep.toml").write_text(SWEEP_TOML)
    cli_run(cli, str(d / "sweep.toml"), "--out", str(d / "out"))
    return d, (d / "out" / "sweep.csv").read_text()


def test_a_sweep_from_values_is_the_clis_sweep_csv(cli_sweep):
    d, want = cli_sweep
    base = (d / "base.toml").read_text()
    df = longhaul.sweep(base, GRID, variants=VARIANTS, backend="threads", progress=False)
    assert len(df) == 8
    assert list(df.columns[:4]) == ["point", "variant", "seed", "topology.links.1.loss"]
    assert df.equals(pd.read_csv(io.StringIO(want)))
    # The sweep file itself, loaded by the same parser as the CLI's.
    again = longhaul.sweep(d / "sweep.toml", backend="threads", progress=False)
    assert again.equals(df)


def test_every_backend_gives_the_same_table(cli_sweep):
    d, want = cli_sweep
    import ray  # a dependency of the tests: `pip install ./python[test]`

    local = longhaul.sweep(d / "sweep.toml", backend="local", workers=2, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = longhaul.sweep(d / "sweep.toml", backend="ray", progress=False)
    finally:
        ray.shutdown()
    threads = longhaul.sweep(d / "sweep.toml", backend="threads", workers=1, progress=False)
    expected = pd.read_csv(io.StringIO(want))
    assert local.equals(expected)
    assert on_ray.equals(expected)
    assert threads.equals(expected)
    # Not a table of equal rows: the points differ.
    assert local["goodput_mbps"].nunique() > 4


def test_seed_replaces_every_points_seed(cli, cli_sweep, tmp_path):
    d, plain = cli_sweep
    # Any 64-bit seed, as the CLI takes it (a TOML file could not hold the largest).
    for seed in (9, 2**64 - 1):
        out = tmp_path / str(seed)
        cli_run(cli, str(d / "sweep.toml"), "--out", str(out), "--seed", str(seed))
        want = pd.read_csv(out / "sweep.csv")
        got = longhaul.sweep(d / "sweep.toml", seed=seed, backend="threads", progress=False)
        # The table's seed column is the grid's value; the runs used `seed`.
        assert got.equals(want), seed
        assert not got.equals(pd.read_csv(io.StringIO(plain))), seed


@pytest.mark.parametrize("grid,variants,key", [
    ({"topology.links.1.loss": []}, None, "grid.topology.links.1.loss"),
    ({"topology.links.1.loss": 0.1}, None, "grid.topology.links.1.loss"),
    ({"topology.links.1.delay": ["fast"]}, None, "topology.links[1].delay"),
    ({}, [{"flow.0": {"protocol": "udt"}}], "variant[0].name"),
])
def test_a_bad_sweep_names_the_key(grid, variants, key):
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.sweep(_base(), grid, variants=variants, progress=False)
    assert key in str(e.value), str(e.value)


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend"):
        longhaul.sweep(_base(), {"seed": [1]}, backend="spark", progress=False)


def test_a_base_that_is_not_a_small_file_is_refused(tmp_path):
    """Read with the bound every scenario file has: a device that never ends, or a
    folder, is an error naming it, not a read until memory runs out."""
    for bad in ("/dev/zero", str(tmp_path)):
        with pytest.raises(longhaul.ScenarioError) as e:
            longhaul.sweep(Path(bad), {"seed": [1]}, progress=False)
        assert bad in str(e.value), str(e.value)
