//! The channel knobs: data channels in a port range, and concurrency and
//! pipelining as separate settings, read off the sender's block log.

use super::*;

/// With a data port range, the channels listen on its first free ports, passing
/// over taken ones, and a session asking for more channels than it has free ports
/// is refused saying so. (A firewall that opens a range needs this; the ports were
/// always the system's choice.)
#[test]
fn data_channels_listen_in_the_port_range_given() {
    // Five UDP ports in a row that are free now, the first of them then taken.
    let (base, taken) = (0..50)
        .find_map(|_| {
            let first = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
            let base = first.local_addr().ok()?.port();
            let rest: Option<Vec<_>> = (1..5u16)
                .map(|i| std::net::UdpSocket::bind(("127.0.0.1", base.checked_add(i)?)).ok())
                .collect();
            rest.map(|_| (base, first)) // the others are let go
        })
        .expect("five free ports in a row");
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("f.bin");
    write(&f, 200_000, 4);
    for (hi, ok) in [(base + 4, true), (base + 3, false)] {
        let dst = tempfile::tempdir().unwrap();
        let (addr, h) = receiver(RecvOptions {
            data_ports: Some(base..=hi),
            ..recv_opts(dst.path(), "k")
        });
        let mut o = send_opts(vec![f.clone()], addr, "k", 4);
        o.transport = Transport::Udt;
        let sent = send(&o);
        if ok {
            outcome(sent, h, "four free ports of five");
            assert!(same_file(&f, &dst.path().join("f.bin")));
        } else {
            let e = sent.unwrap_err().to_string();
            assert!(
                e.contains(&format!("data ports {base}-{hi} have only 3 free")),
                "{e}"
            );
            assert!(h.join().unwrap().is_err());
        }
    }
    drop(taken);
}

/// One parsed line of a block log: `block FILE OFFSET LEN CHANNEL`, `piece FILE
/// OFFSET LEN CHANNEL` or `done FILE ok`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logged {
    Block { file: u32, channel: usize },
    Piece,
    Done { file: u32 },
}

fn read_log(p: &Path) -> Vec<Logged> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            match w[0] {
                "block" => Logged::Block {
                    file: w[1].parse().unwrap(),
                    channel: w[4].parse().unwrap(),
                },
                "piece" => Logged::Piece,
                "done" => {
                    assert_eq!(w[2], "ok", "{l}");
                    Logged::Done {
                        file: w[1].parse().unwrap(),
                    }
                }
                _ => panic!("{l}"),
            }
        })
        .collect()
}

fn first_block(log: &[Logged], f: u32) -> usize {
    log.iter()
        .position(|e| matches!(e, Logged::Block { file, .. } if *file == f))
        .unwrap()
}

fn last_block(log: &[Logged], f: u32) -> usize {
    log.iter()
        .rposition(|e| matches!(e, Logged::Block { file, .. } if *file == f))
        .unwrap()
}

fn done_at(log: &[Logged], f: u32) -> usize {
    log.iter()
        .position(|e| *e == Logged::Done { file: f })
        .unwrap()
}

/// Concurrency and pipelining are separate knobs. With `concurrency` 3 and 2
/// channels per file, a file's blocks all go over one group of 2 channels and three
/// files are in flight at once; without pipelining, a group starts its next file
/// only once the receiver has confirmed the last; with it, the next file starts
/// before that confirmation. Every run ends byte-exact, over UDT and TCP.
#[test]
fn concurrency_and_pipelining_are_separate_knobs() {
    let src = tempfile::tempdir().unwrap();
    let tree = src.path().join("six");
    for i in 0..6u8 {
        write(&tree.join(format!("f{i}.dat")), 600_000, i);
    }
    let files = 6u32;
    for transport in [Transport::Udt, Transport::Tcp] {
        // Concurrency 3, pipelining on.
        let dst = tempfile::tempdir().unwrap();
        let log = dst.path().join("log");
        std::fs::create_dir(dst.path().join("in")).unwrap();
        let (addr, h) = receiver(recv_opts(&dst.path().join("in"), "k"));
        let mut o = send_opts(vec![tree.clone()], addr, "k", 2);
        o.transport = transport;
        o.block_size = 64 << 10;
        o.concurrency = 3;
        o.block_log = Some(log.clone());
        // Small send buffers and a rate cap keep each UDT channel busy for a while
        // (about 120 ms a file), so that every group has connected and started a
        // file before the first group is done; writes into a large buffer would
        // return at once and let the first channel up take every file.
        o.udt.snd_buf_pkts = 64;
        o.udt.max_bw_bps = Some(20_000_000);
        let sent = send(&o).expect("send");
        h.join().unwrap().expect("receive");
        same_tree(&tree, &dst.path().join("in/six"));
        assert_eq!(sent.confirmation_waits, 0);
        let l = read_log(&log);
        let mut lanes = std::collections::BTreeMap::<u32, std::collections::BTreeSet<usize>>::new();
        for e in &l {
            if let Logged::Block { file, channel } = *e {
                lanes.entry(file).or_default().insert(channel / 2);
            }
        }
        assert!(
            lanes.values().all(|s| s.len() == 1),
            "{transport:?}: a file left its group: {lanes:?}"
        );
        if transport == Transport::Udt {
            // (TCP channels write into the kernel's large buffers at once, so which
            // groups get files there is a race; the grouping above still holds.)
            let groups: std::collections::BTreeSet<_> = lanes.values().flatten().collect();
            assert_eq!(groups.len(), 3, "not every group worked: {lanes:?}");
            assert!(
                first_block(&l, 1) < last_block(&l, 0) && first_block(&l, 2) < last_block(&l, 0),
                "three files were not in flight at once: {l:?}"
            );
        }
        o.udt = send_opts(vec![], addr, "k", 1).udt;

        // Concurrency 1, no pipelining: each file waits for the last one's verdict.
        let dst = tempfile::tempdir().unwrap();
        let log = dst.path().join("log");
        std::fs::create_dir(dst.path().join("in")).unwrap();
        let (addr, h) = receiver(recv_opts(&dst.path().join("in"), "k"));
        o.dest = addr;
        o.concurrency = 1;
        o.pipelining = false;
        o.block_log = Some(log.clone());
        let sent = send(&o).expect("send");
        h.join().unwrap().expect("receive");
        same_tree(&tree, &dst.path().join("in/six"));
        // A group that asks for its next file only after the verdict came (a
        // descheduled sender on a loaded machine) does not wait: at most one wait
        // per file after the first. The order below is what must hold.
        assert!(
            sent.confirmation_waits <= u64::from(files - 1),
            "{} waits for {files} files",
            sent.confirmation_waits
        );
        let l = read_log(&log);
        for f in 1..files {
            assert!(
                done_at(&l, f - 1) < first_block(&l, f),
                "{transport:?}: file {f} started before file {} was confirmed: {l:?}",
                f - 1
            );
        }

        // Concurrency 1, pipelining: the next file does not wait.
        let dst = tempfile::tempdir().unwrap();
        let log = dst.path().join("log");
        std::fs::create_dir(dst.path().join("in")).unwrap();
        let (addr, h) = receiver(recv_opts(&dst.path().join("in"), "k"));
        o.dest = addr;
        o.pipelining = true;
        o.block_log = Some(log.clone());
        let sent = send(&o).expect("send");
        h.join().unwrap().expect("receive");
        same_tree(&tree, &dst.path().join("in/six"));
        assert_eq!(sent.confirmation_waits, 0);
        let l = read_log(&log);
        assert!(
            (1..files).any(|f| first_block(&l, f) < done_at(&l, f - 1)),
            "{transport:?}: every file waited for the last one's verdict: {l:?}"
        );
    }
}
