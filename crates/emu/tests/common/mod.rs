//! What the emulator tests share: the lock that runs them one at a time, a run
//! of the emulator around a workload, the retry that keeps only runs the emulator
//! reports valid, and a constant-rate UDP probe.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_emu::clock::Clock;
use longhaul_emu::emulator::{CLIENT_ADDR, SERVER_ADDR};
use longhaul_emu::{netns, EmuConfig, EmuReport, Emulator, Pair};

pub static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the lock and checks the machine can run namespace tests.
pub fn prerequisites() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        nix::unistd::geteuid().is_root(),
        "the emulator tests need root (network namespaces and TUN devices)"
    );
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "the emulator tests need /dev/net/tun"
    );
    guard
}

/// Runs the emulator for `cfg` while `work` runs; returns the report and what
/// `work` returned. The namespaces are gone when this returns.
pub fn with_emulator<R>(cfg: EmuConfig, work: impl FnOnce(&Pair) -> R) -> (EmuReport, R) {
    with_emulator_offload(cfg, true, work)
}

/// [`with_emulator`], choosing whether the TUN devices use offloads.
pub fn with_emulator_offload<R>(
    cfg: EmuConfig,
    offload: bool,
    work: impl FnOnce(&Pair) -> R,
) -> (EmuReport, R) {
    let pair = Pair::create(cfg.mtu, offload).expect("namespaces and TUNs");
    assert_eq!(
        pair.offload(),
        offload,
        "this kernel's TUN refused offloads"
    );
    let names = [
        pair.client.name().to_string(),
        pair.server.name().to_string(),
    ];
    let emu = Emulator::new(cfg, Duration::from_millis(100)).expect("valid config");
    let stop = AtomicBool::new(false);
    let (report, r) = thread::scope(|s| {
        let h = s.spawn(|| emu.run(&pair, &stop));
        let r = work(&pair);
        stop.store(true, Ordering::Relaxed);
        (h.join().expect("emulator thread").expect("emulator run"), r)
    });
    drop(pair);
    let left = netns::list();
    for n in names {
        assert!(!left.contains(&n), "namespace {n} was left behind");
    }
    (report, r)
}

/// What a constant-rate UDP probe saw at the receiver.
#[derive(Debug, Default)]
pub struct Probe {
    pub sent: u64,
    pub received: u64,
    /// Constant-rate packets received (the warm-up left out).
    pub rate_packets: u64,
    /// One-way delays of the constant-rate packets.
    pub owds: Vec<u64>,
    pub first_ns: u64,
    pub last_ns: u64,
    pub min_owd_ns: u64,
    /// Sequence numbers of the constant-rate packets, in arrival order.
    pub seqs: Vec<u64>,
}

pub const PROBE_PORT: u16 = 9000;
pub const WARM_UP: u8 = 1;
/// Packets sent 2 ms apart before the constant rate starts: they cross an empty
/// queue, so the smallest one-way delay is measured at any probe rate, on warm
/// kernel paths.
pub const WARM_UPS: u64 = 50;

/// Sends `ip_len`-byte UDP packets from client to server at `rate_bps` (counting IP
/// bytes) for `secs`, each stamped with the send time on a clock shared with the
/// receiver, which is in the same process.
pub fn cbr(pair: &Pair, rate_bps: f64, ip_len: usize, secs: f64) -> Probe {
    let clock = Clock::new();
    let done = Arc::new(AtomicBool::new(false));
    let rx = {
        let done = done.clone();
        pair.server.spawn(move || {
            let sock = UdpSocket::bind(SocketAddr::from((SERVER_ADDR, PROBE_PORT))).unwrap();
            // 8 MB of receive buffer (forced past rmem_max: we are root), so a receiver
            // thread descheduled for a while loses nothing the emulator delivered.
            nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20))
                .unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let mut p = Probe {
                min_owd_ns: u64::MAX,
                ..Probe::default()
            };
            let mut buf = [0u8; 2048];
            let mut idle = 0;
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let now = clock.now().as_nanos();
                        assert_eq!(n, ip_len - 28);
                        let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap());
                        let owd = now - sent;
                        p.min_owd_ns = p.min_owd_ns.min(owd);
                        p.received += 1;
                        if buf[16] == WARM_UP {
                            continue;
                        }
                        if p.rate_packets == 0 {
                            p.first_ns = now;
                        }
                        p.last_ns = now;
                        p.rate_packets += 1;
                        p.owds.push(owd);
                        p.seqs
                            .push(u64::from_le_bytes(buf[..8].try_into().unwrap()));
                        idle = 0;
                    }
                    Err(_) => {
                        if done.load(Ordering::Relaxed) {
                            idle += 1;
                            // 0.5 s of silence after the sender stopped.
                            if idle >= 10 {
                                return p;
                            }
                        }
                    }
                }
            }
        })
    };
    thread::sleep(Duration::from_millis(100));
    let tx = pair.client.spawn(move || {
        let _ = nix::sys::prctl::set_timerslack(1);
        let sock = UdpSocket::bind(SocketAddr::from((CLIENT_ADDR, 0))).unwrap();
        sock.connect(SocketAddr::from((SERVER_ADDR, PROBE_PORT)))
            .unwrap();
        let gap = (ip_len as f64 * 8.0 / rate_bps * 1e9) as u64;
        let n = (secs * 1e9 / gap as f64) as u64;
        let mut payload = vec![0u8; ip_len - 28];
        payload[16] = WARM_UP;
        for k in 0..WARM_UPS {
            payload[8..16].copy_from_slice(&clock.now().as_nanos().to_le_bytes());
            sock.send(&payload).unwrap();
            thread::sleep(Duration::from_nanos(2_000_000 + k));
        }
        payload[16] = 0;
        let start = clock.now().as_nanos();
        for k in 0..n {
            let due = start + k * gap;
            loop {
                let now = clock.now().as_nanos();
                if now >= due {
                    break;
                }
                // Sleep (with a 1 ns timer slack) until 50 µs before the send time,
                // then spin: a sender that spins all the time would take a core
                // from the emulator on a two-core machine.
                if due - now > 100_000 {
                    thread::sleep(Duration::from_nanos(due - now - 50_000));
                } else {
                    std::hint::spin_loop();
                }
            }
            payload[..8].copy_from_slice(&k.to_le_bytes());
            payload[8..16].copy_from_slice(&clock.now().as_nanos().to_le_bytes());
            sock.send(&payload).unwrap();
        }
        WARM_UPS + n
    });
    let sent = tx.join().unwrap().unwrap();
    done.store(true, Ordering::Relaxed);
    let mut p = rx.join().unwrap().unwrap();
    p.sent = sent;
    p
}

/// The pause before the first retry of a run the emulator reported invalid; each
/// later pause is twice the one before (2, 4, 8, 16 s for five tries). A stall of
/// the VM's host can outlast a few seconds: on 2026-11-28 five tries two seconds
/// apart all saw lateness p99 of 0.4-1.4 ms at a host load of 0.6, and the same
/// test passed a minute later.
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// After the pause, waits up to a minute for a second in which the hypervisor
/// took under 1 % of every CPU and a timer kept time
/// ([`longhaul_emu::quiet::wait_for_quiet_host`]), and says how the wait went.
pub fn settle_host() {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let q = longhaul_emu::quiet::wait_for_quiet_host(std::time::Duration::from_secs(60), &stop);
    eprintln!("{q}");
}

/// The host's load averages, for a failure message.
pub fn host_load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs `attempt` until the emulator reports the run valid, at most `tries` times,
/// and returns the valid run; panics naming each invalid run's problems and the
/// host's load if none was. A test asserts the physics only on what this returns,
/// so no assertion passes because a run was skipped.
///
/// An invalid run is followed by a pause before the next, [`SETTLE`] and doubling,
/// then by a wait for a quiet host ([`settle_host`]): on a shared host, what made
/// the timer late (another tenant, the suite's own build or test threads) tends
/// to pass within seconds, and an immediate retry meets it again.
pub fn valid_run<R>(tries: u32, mut attempt: impl FnMut() -> (EmuReport, R)) -> (EmuReport, R) {
    let mut seen = vec![];
    for i in 1..=tries {
        if i > 1 {
            std::thread::sleep(SETTLE * (1 << (i - 2).min(4)));
            settle_host();
        }
        let (report, r) = attempt();
        if report.health.valid {
            return (report, r);
        }
        let why = format!(
            "run {i}: {:?} (host load {})",
            report.health.problems,
            host_load()
        );
        // Said at once, so a test that passes on a later try still leaves a trace
        // of how often its runs go invalid (`--nocapture`, or a CI log on failure).
        eprintln!("invalid {why}");
        seen.push(why);
    }
    panic!("no valid run in {tries} tries:\n{}", seen.join("\n"));
}

/// `n` varied bytes (no run of equal blocks, so a misplaced block shows).
pub fn varied_bytes(n: u64) -> Arc<Vec<u8>> {
    Arc::new(
        (0..n)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect(),
    )
}

/// Sends `data` over one kernel TCP connection from client to server port `port`;
/// returns what the server read.
pub fn tcp_exact(pair: &Pair, port: u16, data: &Arc<Vec<u8>>) -> Vec<u8> {
    let listener = pair
        .server
        .run(|| TcpListener::bind(SocketAddr::from((SERVER_ADDR, port))).unwrap())
        .unwrap();
    let rx = pair.server.spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut v = vec![];
        s.read_to_end(&mut v).unwrap();
        v
    });
    let d = data.clone();
    let tx = pair.client.spawn(move || {
        let mut s = TcpStream::connect(SocketAddr::from((SERVER_ADDR, port))).unwrap();
        s.write_all(&d).unwrap();
    });
    tx.join().unwrap().unwrap();
    rx.join().unwrap().unwrap()
}
