"""The built-in studies, and `python -m longhaul` from the shell."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import longhaul
from conftest import REPO, cli_run


def test_studies_lists_the_repositorys_studies():
    want = sorted(p.name for p in (REPO / "studies").iterdir() if p.is_dir())
    got = longhaul.studies()
    assert sorted(got) == want
    for name, title in got.items():
        heading = next(line for line in (REPO / "studies" / name / "README.md").read_text()
                       .splitlines() if line.startswith("#"))
        assert title == heading.lstrip("#").strip()


def test_a_study_gives_the_clis_tables(cli, tmp_path):
    cli_run(cli, str(REPO / "studies" / "sctp-slow-start"), "--out", str(tmp_path / "cli"))
    got = longhaul.study("sctp-slow-start", tmp_path / "py", jobs=2)
    assert got.outdir == str(tmp_path / "py")
    sweeps = sorted(p.name for p in (tmp_path / "cli").iterdir() if p.is_dir())
    assert sorted(got) == sweeps and len(sweeps) >= 2
    for name, table in got.items():
        want = pd.read_csv(tmp_path / "cli" / name / "sweep.csv")
        assert table.equals(want), name
        # The report beside it, as the CLI writes it.
        assert (tmp_path / "py" / name / "results.md").read_text() == \
            (tmp_path / "cli" / name / "results.md").read_text()


def test_an_unknown_study_names_the_known_ones():
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.study("ns-3")
    assert "ar-udt" in str(e.value) and "no such study" in str(e.value)


def _module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "longhaul", *args], capture_output=True,
                          text=True)


def test_the_shell_route_writes_the_clis_sweep_csv(cli, tmp_path):
    study = REPO / "studies" / "sctp-slow-start" / "bandwidth.sweep.toml"
    cli_run(cli, str(study), "--out", str(tmp_path / "cli"))
    r = _module("sweep", str(study), "--backend", "threads", "-q", "-o", str(tmp_path / "s.csv"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "s.csv").read_bytes() == (tmp_path / "cli" / "sweep.csv").read_bytes()


def test_the_shell_route_says_what_is_wrong(tmp_path):
    bad = tmp_path / "sweep.toml"
    bad.write_text('scenario = "missing.toml"\n')
    r = _module("sweep", str(bad))
    assert r.returncode == 2
    assert "missing.toml" in r.stderr and "Traceback" not in r.stderr
    r = _module("studies")
    assert r.returncode == 0 and "ar-udt" in r.stdout
