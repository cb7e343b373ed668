//! SCTP and the study's TCP in the simulator: the SCTP slow-start study's tables, loss
//! recovery, determinism.

mod common;

use longhaul_sim::metrics::FlowSummary;

/// The study's testbed: server, router, client; the router's link at `rate` with a
/// one-way `delay` each way and dummynet's 50-slot queue.
fn testbed(rate: &str, delay: &str, loss: f64, flow: &str) -> String {
    format!(
        r#"
duration = "120s"
seed = 3
[topology]
kind = "chain"
[[topology.links]]
rate = "100Mbps"
delay = "0ms"
[[topology.links]]
rate = "{rate}"
delay = "{delay}"
queue = "50pkts"
loss = {loss:e}
loss_reverse = {loss:e}
[[flow]]
{flow}
[outputs]
plots = false
"#
    )
}

fn one_flow(text: &str) -> FlowSummary {
    common::run(text).summary.flows[0].clone()
}

#[test]
fn table_2_bytes_per_round_are_reproduced_exactly() {
    let sctp = one_flow(&testbed(
        "10Mbps",
        "10ms",
        0.0,
        "protocol = \"sctp\"\nprofile = \"linux-2.6.15\"\nfiles = { count = 5, size = \"13.5KB\" }",
    ));
    // The paper's Table 2: 4380, 8760, 17520, 35040, then the last 1800 bytes.
    assert_eq!(sctp.round_bytes, Some(vec![4380, 8760, 17520, 35040, 1800]));
    assert_eq!(sctp.delivered_bytes, 67_500);
    assert_eq!(sctp.retransmits, Some(0));
    let tcp = one_flow(&testbed(
        "10Mbps",
        "10ms",
        0.0,
        "protocol = \"tcp\"\nprofile = \"linux-2.6.15\"\nfiles = { count = 5, size = \"13.5KB\" }",
    ));
    // TCP: 3 segments, the first write's 12-byte tail one of them.
    assert_eq!(tcp.round_bytes.as_ref().unwrap()[0], 2908);
    assert_eq!(tcp.delivered_bytes, 67_500);
    // With no loss, SCTP's larger first rounds finish sooner (the paper: 12 %).
    let (s, t) = (sctp.transfer_time_s.unwrap(), tcp.transfer_time_s.unwrap());
    assert!(s < 0.9 * t, "sctp {s} s, tcp {t} s");
}

#[test]
fn table_3_first_round_bytes_for_both_protocols() {
    // (file size, TCP, SCTP), 10 files: the paper's Table 3.
    let table = [
        (1000, 3896, 5000),
        (1350, 4246, 5400),
        (1448, 4344, 5792),
        (1452, 2900, 5808),
        (5000, 2908, 4380),
    ];
    for (size, tcp, sctp) in table {
        for (proto, want) in [("tcp", tcp), ("sctp", sctp)] {
            let f = one_flow(&testbed(
                "10Mbps",
                "10ms",
                0.0,
                &format!(
                    "protocol = \"{proto}\"\nprofile = \"linux-2.6.15\"\n\
                     files = {{ count = 10, size = \"{size}B\" }}"
                ),
            ));
            assert_eq!(f.round_bytes.unwrap()[0], want, "{proto}, {size} B files");
            assert_eq!(f.delivered_bytes, 10 * size);
        }
    }
}

#[test]
fn sctp_completes_under_random_loss_and_bulk_flows_keep_sending() {
    for seed_loss in [0.01, 0.03] {
        let f = one_flow(&testbed(
            "10Mbps",
            "10ms",
            seed_loss,
            "protocol = \"sctp\"\nfiles = { count = 4, size = \"200KB\", message = 3000 }",
        ));
        assert_eq!(f.delivered_bytes, 800_000, "loss {seed_loss}");
        assert!(f.completion_time_s.is_some());
        assert!(f.retransmits.unwrap() > 0 && f.fast_recoveries.unwrap() > 0);
    }
    // An endless backlog whose receive window (48 KB) keeps the 50-slot queue from
    // overflowing fills the link; the reader's window updates keep it open.
    let text = testbed(
        "10Mbps",
        "10ms",
        0.0,
        "protocol = \"sctp\"\nrecv_buffer = \"48KB\"",
    )
    .replace("120s", "20s");
    let r = common::run(&text);
    let link = r.summary.links.iter().find(|l| l.name == "link1").unwrap();
    assert_eq!(link.drops_queue, 0);
    assert!(
        link.utilisation > 0.95,
        "bulk SCTP uses {} of the link",
        link.utilisation
    );
}

#[test]
fn sctp_runs_are_deterministic() {
    let text = testbed(
        "10Mbps",
        "5ms",
        0.02,
        "protocol = \"sctp\"\nfiles = { count = 3, size = \"100KB\" }",
    );
    let a = common::run(&text);
    let b = common::run(&text);
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.goodput_series, b.goodput_series);
}
