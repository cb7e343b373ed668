"""`longhaul.run`: the CLI's values, documented columns and dtypes, errors that name
the key, and a GIL released while it runs."""

from __future__ import annotations

import json
import sys
import threading
import time
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import longhaul
from conftest import REPO, SMALL, cli_run


def test_summary_is_the_clis_for_the_same_seed(cli, small, tmp_path):
    cli_run(cli, str(small), "--out", str(tmp_path / "cli"), "--seed", "11")
    want = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert want["seed"] == 11
    # A path, the TOML text and a dict of the same document: the same values, exactly.
    for given in (small, str(small), SMALL, tomllib.loads(SMALL)):
        got = longhaul.run(given, seed=11).summary
        assert got == want, f"given as {type(given).__name__}"
    # Without the override, the scenario's own seed: a different run.
    assert longhaul.run(small).summary != want


def test_outdir_holds_what_the_cli_writes(cli, small, tmp_path):
    text = SMALL.replace("[outputs]", '[outputs]\npcap = ["link1"]\nplots = false')
    scenario = tmp_path / "s.toml"
    scenario.write_text(text)
    cli_run(cli, str(scenario), "--out", str(tmp_path / "cli"))
    r = longhaul.run(scenario, outdir=tmp_path / "py")
    assert r.outdir == str(tmp_path / "py")
    for name in ("summary.json", "flows.csv", "links.csv", "trace.csv", "link1.pcap"):
        a = (tmp_path / "cli" / name).read_bytes()
        b = (tmp_path / "py" / name).read_bytes()
        assert a == b, name
    assert r.pcap_paths == {"link1": str(tmp_path / "py" / "link1.pcap")}
    assert r.pcap_path == r.pcap_paths["link1"]
    # In memory: no files, no captures.
    assert longhaul.run(scenario).pcap_path is None


def _check_frame(df: pd.DataFrame, schema: dict, required: list) -> None:
    assert all(c in df.columns for c in required), (list(df.columns), required)
    for c in df.columns:
        assert c in schema, c
        assert str(df[c].dtype) == schema[c], (c, df[c].dtype, schema[c])


def test_frames_have_the_documented_columns_and_dtypes(small):
    r = longhaul.run(small)
    f = r.flows
    _check_frame(f, longhaul.FLOW_COLUMNS, longhaul._result.FLOW_REQUIRED)
    assert list(f["protocol"]) == ["tcp", "udt", "udp"]
    assert f["naks"].isna().tolist() == [True, False, True]
    assert f["loss_rate"].isna().tolist() == [True, True, False]
    assert f.loc[0, "goodput_mbps"] == r.summary["flows"][0]["goodput_mbps"]

    _check_frame(r.links, longhaul.LINK_COLUMNS, list(longhaul.LINK_COLUMNS))
    assert list(r.links["name"]) == [link["name"] for link in r.summary["links"]]
    assert (r.links["drops_red"] == 0).all()

    s = r.series
    _check_frame(s, longhaul.SERIES_COLUMNS, list(longhaul.SERIES_COLUMNS))
    samples = 8  # 4 s at 500 ms
    assert len(s) == samples * (3 + 2 * len(r.summary["links"]))
    g = s[(s.kind == "flow") & (s.name == "0")]
    assert list(g.time_s) == [0.5 * (i + 1) for i in range(samples)]
    # The goodput series adds up to the bytes delivered.
    delivered = (g.value * 0.5 * 1e6 / 8).sum()
    assert delivered == pytest.approx(r.summary["flows"][0]["delivered_bytes"], rel=1e-6)

    t = r.trace
    _check_frame(t, longhaul.TRACE_COLUMNS, list(longhaul.TRACE_COLUMNS))
    assert len(t) > 0 and set(t.flow) <= {0, 1}


def test_every_field_the_simulator_reports_is_documented():
    """The column tables are the simulator's fields: a field added there and not here
    fails (run raises on a field it does not know), and so does one documented here
    that no protocol reports."""
    seen = set()
    for study in ("sctp-slow-start", "snoop", "diffserv", "ar-udt", "parallel-transfer"):
        base = REPO / "studies" / study / "base.toml"
        doc = tomllib.loads(base.read_text())
        doc["duration"] = "2s"
        r = longhaul.run(doc)
        r.flows, r.links  # noqa: B018 (builds the frames; raises on an unknown field)
        for f in r.summary["flows"]:
            seen |= set(f)
    seen |= set(longhaul.run(SMALL).summary["flows"][1])
    never = set(longhaul.FLOW_COLUMNS) - seen
    assert never <= {"ar_udt_classes", "completion_time_s", "snoop_rtt_ms", "snoop_rto_ms",
                     "local_retransmits", "suppressed_dupacks"}, never


@pytest.mark.parametrize("edit,key", [
    (lambda d: d["topology"]["links"][1].update(delay="10 parsecs"), "topology.links[1].delay"),
    (lambda d: d["flow"][0].update(cc="compound"), "flow[0].cc"),
    (lambda d: d.update(colour="blue"), "colour"),
])
def test_a_bad_scenario_raises_scenario_error_naming_the_key(edit, key):
    doc = tomllib.loads(SMALL)
    edit(doc)
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.run(doc)
    assert key in str(e.value), str(e.value)
    assert isinstance(e.value, ValueError)  # also a ValueError, for generic handlers


def test_errors_name_the_file(tmp_path):
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.run(tmp_path / "missing.toml")
    assert "missing.toml" in str(e.value) and e.value.path.endswith("missing.toml")
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.run("duration = \n")
    assert e.value.path == "<toml>"
    with pytest.raises(longhaul.ScenarioError) as e:
        longhaul.run({"duration": None})
    assert "None" in str(e.value)
    with pytest.raises(TypeError):
        longhaul.run(42)


def test_the_gil_is_released_while_a_run_runs():
    """Another thread runs Python code while this one is inside a run. The switch
    interval is set far beyond the test's length, so the only way the other thread
    gets the GIL between `inside = True` and `inside = False` is the run releasing
    it: with the GIL held, the count would be exactly 0."""
    doc = tomllib.loads(SMALL)
    doc["duration"] = "20s"
    state = {"inside": False, "ticks": 0}
    stop = threading.Event()

    def count():
        while not stop.is_set():
            if state["inside"]:
                state["ticks"] += 1
            time.sleep(0)  # gives the GIL up, so this thread cannot starve the other

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        t = threading.Thread(target=count)
        t.start()
        state["inside"] = True
        r = longhaul.run(doc)
        state["inside"] = False
        stop.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert r.summary["duration_s"] == 20.0
    assert state["ticks"] > 100, state["ticks"]
