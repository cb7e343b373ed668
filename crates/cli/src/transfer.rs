//! `longhaul send` and `longhaul recv`: files over parallel UDT channels.

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use longhaul_net::transfer::{
    send, Log, RecvOptions, SendOptions, Server, Skip, TransferError, Transport,
};
use longhaul_proto::udt::{ArrivalClock, NakReport, RateControl, UdtConnConfig, MIN_MSS};

use crate::Failure;

/// The control port when none is given.
const DEFAULT_PORT: u16 = 7070;

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The pre-shared token, at least 128 bits (make one with `longhaul token`;
    /// visible to other users in the process list: prefer --token-file or
    /// LONGHAUL_TOKEN).
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file whose first line is the token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Send the data channels in clear (the control channel and the handshake stay
    /// encrypted, and blocks stay authenticated by their keyed hashes). Both ends
    /// must say it; UDT channels then speak UDT4's wire format.
    #[arg(long)]
    no_encryption: bool,
}

#[derive(Debug, Args)]
pub struct TokenCmdArgs {}

/// `longhaul token`: prints a new random token (256 bits, hex).
pub fn token_cmd(_: TokenCmdArgs) -> Result<(), Failure> {
    outln!("{}", longhaul_net::secure::new_token())?;
    Ok(())
}

impl TokenArgs {
    fn token(&self) -> Result<String, Failure> {
        let t = match (&self.token, &self.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => crate::read_small_file(f, 1 << 20)
                .map_err(|e| Failure::input(anyhow::anyhow!("--token-file {e}")))?
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            (None, None) => std::env::var("LONGHAUL_TOKEN").unwrap_or_default(),
        };
        if t.is_empty() {
            return Err(Failure::input(anyhow::anyhow!(
                "no token: make one with `longhaul token > FILE` and give both ends \
                 --token-file FILE (or LONGHAUL_TOKEN); transfers are never unauthenticated"
            )));
        }
        longhaul_net::secure::check_token(&t).map_err(|e| Failure::input(anyhow::anyhow!(e)))?;
        Ok(t)
    }
}

#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Directory the files go into (created if missing); nothing is written outside it.
    #[arg(required_unless_present = "discard")]
    dir: Option<PathBuf>,
    /// Check every block and file but write nothing: memory to memory, with
    /// `longhaul send --synthetic` on the other side.
    #[arg(long, conflicts_with = "dir")]
    discard: bool,
    /// Control address to listen on.
    #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)))]
    listen: SocketAddr,
    /// Replace files here that differ from the sender's. A file here of the name and
    /// size offered is compared by content (read back and hashed) either way: the same
    /// is confirmed without being sent; another is replaced with this flag, and
    /// without it kept and reported. Any other file in the way is replaced with this
    /// flag, and without it refuses the session.
    #[arg(long)]
    overwrite: bool,
    /// Sessions to serve, one after another, before exiting (0: until interrupted).
    /// A failed session is reported and the next one served; the exit code is 1 if
    /// any failed.
    #[arg(long, default_value_t = 1)]
    sessions: u64,
    /// Ports for the data channels, LO-HI (or one port): the first free ones, one
    /// per channel, for a firewall that opens only those (as GridFTP's
    /// GLOBUS_TCP_PORT_RANGE). By default the system picks them.
    #[arg(long)]
    data_ports: Option<String>,
    /// Refuse sessions whose buffers (channels × (two blocks, and over UDT a third block
    /// and the packet buffer)) would take more memory than this here.
    #[arg(long, default_value = "512MiB")]
    memory_cap: String,
    /// Largest UDT packet this end takes, IP and UDP headers included: a connection
    /// runs at the smaller of the two ends' (UDT4's handshake). 9000 with `send --mss
    /// 9000` for jumbo frames.
    #[arg(long, default_value_t = 1500)]
    mss: u32,
    /// UDT's receive buffer per channel, packets (UDT4's 8192 by default: 12 MB,
    /// which bounds a channel to its buffer per round trip, 477 Mb/s at 200 ms).
    /// Raise it at both ends for few channels on a long fast path; counted by
    /// --memory-cap.
    #[arg(long, default_value_t = UdtConnConfig::default().rcv_buf_pkts, value_name = "PACKETS")]
    udt_buffer: u32,
    #[command(flatten)]
    token: TokenArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// `--udt-buffer` (checked) over `cfg`: UDT's send and receive buffers, and the
/// flight flag (UDT4's cap on the peer's window) at least as large.
fn udt_buffers(cfg: UdtConnConfig, packets: u32) -> Result<UdtConnConfig, Failure> {
    if !(32..=1 << 20).contains(&packets) {
        return Err(Failure::input(anyhow::anyhow!(
            "--udt-buffer {packets}: must be 32 to 1048576 packets ({}, UDT4's, unless set)",
            UdtConnConfig::default().rcv_buf_pkts
        )));
    }
    Ok(UdtConnConfig {
        rcv_buf_pkts: packets,
        snd_buf_pkts: packets,
        flight_flag_size: packets.max(cfg.flight_flag_size),
        ..cfg
    })
}

/// `--mss`, on either end.
fn check_mss(mss: u32) -> Result<(), Failure> {
    if !(MIN_MSS..=65_000).contains(&mss) {
        return Err(Failure::input(anyhow::anyhow!(
            "--mss {mss}: must be {MIN_MSS} to 65000 (bytes, IP and UDP headers included)"
        )));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// Files and directories (sent recursively), then HOST[:PORT] of a `longhaul recv`
    /// (only HOST[:PORT] with --synthetic).
    #[arg(required = true, num_args = 1..)]
    args: Vec<String>,
    /// Send one generated file of this size (named `synthetic`) instead of PATHs:
    /// with `longhaul recv --discard`, a memory-to-memory run of the whole
    /// protocol (blocks, hashes, digests) that no disk limits.
    #[arg(long, value_name = "SIZE")]
    synthetic: Option<String>,
    /// Data channels per file (parallelism): each file is striped over this many.
    #[arg(long, default_value_t = 4)]
    channels: u16,
    /// Files in flight at once (concurrency), each on its own group of --channels
    /// channels: the session opens channels × concurrency.
    #[arg(long, default_value_t = 1)]
    concurrency: u16,
    /// Wait for the receiver to confirm each file before a channel group starts
    /// the next (one round trip per file, as FTP without pipelining). By default
    /// files follow each other on the channels without waiting.
    #[arg(long)]
    no_pipelining: bool,
    /// Append a line per block handed to a channel (`block FILE OFFSET LEN
    /// CHANNEL`), per piece of a split block sent (`piece FILE OFFSET LEN
    /// CHANNEL`) and per confirmed file (`done FILE ok|failed`) to FILE.
    #[arg(long, value_name = "FILE")]
    block_log: Option<PathBuf>,
    /// What the data channels run: udt (UDP) or tcp (the kernel's TCP).
    #[arg(long, default_value = "udt", value_parser = ["udt", "tcp"])]
    transport: String,
    /// Block size (each block is checked with BLAKE3 on arrival).
    #[arg(long, default_value = "4MiB")]
    block_size: String,
    /// UDT packet size, IP and UDP headers included.
    #[arg(long, default_value_t = 1500)]
    mss: u32,
    /// UDT's send buffer per channel, packets (UDT4's 8192 by default: 12 MB, which
    /// bounds a channel to its buffer per round trip, 477 Mb/s at 200 ms). Raise it
    /// at both ends for few channels on a long fast path; counted by --memory-cap.
    #[arg(long, default_value_t = UdtConnConfig::default().rcv_buf_pkts, value_name = "PACKETS")]
    udt_buffer: u32,
    /// UDT's rate control. bbr-lh (default): BBR with longhaul's changes, which keeps
    /// a long lossy path full; bbr: Linux's BBR v1; bbr-v3: v1 with BBRv3's 2 % loss
    /// bound; udt: UDT4's native control, which slows down on random loss; ar-udt:
    /// the AR-UDT paper's. docs/bbr.md says when to choose which.
    #[arg(long, default_value = "bbr-lh", value_parser = clap::builder::PossibleValuesParser::new(RateControl::NAMES))]
    cc: String,
    /// The channels share one BBR model (bbr, bbr-v3, bbr-lh), so that to the path
    /// they are one flow: the default for UDT channels running BBR. Given where
    /// there is no model to share (TCP, or UDT's own controls), it is an error.
    #[arg(long, overrides_with = "no_couple")]
    couple: bool,
    /// Give each channel its own BBR model, as separate flows. They overshoot a
    /// shared bottleneck together (a quarter of what they offer dropped at
    /// 1 Gb/s × 50 ms, and less carried than coupled), and carry about as much as
    /// coupled under heavy random loss (docs/bbr.md, "Coupled channels").
    #[arg(long, overrides_with = "couple")]
    no_couple: bool,
    /// Cap the total sending rate (e.g. 500Mbps), shared evenly by the UDT channels
    /// (UDT4's UDT_MAXBW on each).
    #[arg(long)]
    rate_limit: Option<String>,
    #[command(flatten)]
    token: TokenArgs,
    /// Refuse to start if the session's buffers (channels × (two blocks, and over UDT a
    /// third block and the packet buffer)) would take more memory than this here.
    #[arg(long, default_value = "512MiB")]
    memory_cap: String,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Print NDJSON events as the transfer runs (start, an interval a second, end;
    /// field names after iperf3's --json-stream).
    #[arg(long, conflicts_with = "json")]
    json_stream: bool,
}

pub fn recv(a: RecvArgs) -> Result<(), Failure> {
    let token = a.token.token()?;
    // With --discard nothing is written; names are still checked against the
    // current directory.
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir).map_err(|e| {
        let why = if dir.exists() && !dir.is_dir() {
            "it exists and is not a directory".to_string()
        } else {
            format!("cannot create it: {e}")
        };
        Failure::input(anyhow::anyhow!(
            "{}: {why}; give a directory for the received files",
            dir.display()
        ))
    })?;
    let memory_cap = memory_cap(&a.memory_cap)?;
    check_mss(a.mss)?;
    let data_ports = a.data_ports.as_deref().map(data_ports).transpose()?;
    let opts = RecvOptions {
        memory_cap,
        data_ports,
        discard: a.discard,
        listen: a.listen,
        overwrite: a.overwrite,
        // The draft's periodic NAK: UDT4 4.11's single NAK leaves each lost
        // retransmission to the sender's EXP timer (seconds on a lossy path).
        // Arrivals timed in nanoseconds: UDT4's whole microseconds misread the
        // rate above a few Gb/s, and a BBR sender paces at what is read.
        udt: udt_buffers(
            UdtConnConfig {
                nak_report: NakReport::Periodic,
                arrival_clock: ArrivalClock::Nanos,
                mss: a.mss,
                ..UdtConnConfig::default()
            },
            a.udt_buffer,
        )?,
        encrypt: !a.token.no_encryption,
        // Strangers (connections that never authenticate) are said, escaped and
        // short, and the receiver serves on.
        log: Some(Log(Arc::new(|line: &str| eprintln!("note: {line}")))),
        ..RecvOptions::new(dir.canonicalize()?, &token)
    };
    // Session after session on one listener, so a sender never finds the port
    // shut; only authenticated senders make sessions.
    let server = Server::bind(&opts)?;
    listening(server.local_addr());
    if a.sessions == 1 {
        let s = server.serve_one(&opts)?;
        return report_session(&s, a.json);
    }
    let mut failed = 0u64;
    let mut served = 0u64;
    while a.sessions == 0 || served < a.sessions {
        served += 1;
        match server.serve_one(&opts) {
            Ok(s) => report_session(&s, a.json)?,
            // Another receiver took the directory between sessions: it stays
            // theirs, so serving on would only refuse every sender.
            Err(e @ TransferError::DirInUse(_)) => return Err(e.into()),
            Err(e) => {
                failed += 1;
                eprintln!("error: session {served}: {e}");
                // A failure that comes at once again and again (the listener out of
                // descriptors) must not spin.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    if failed > 0 {
        return Err(anyhow::anyhow!("{failed} of {served} sessions failed").into());
    }
    Ok(())
}

/// Says where the receiver listens, and warns if the UDT channels' socket buffers
/// are small.
fn listening(addr: SocketAddr) {
    eprintln!("listening on {addr}");
    if let Ok(Some(w)) = longhaul_net::socket_buffer_warning(addr.ip()) {
        eprintln!("warning (UDT channels): {w}");
    }
}

/// Prints what a session received.
fn report_session(s: &longhaul_net::transfer::RecvSummary, json: bool) -> Result<(), Failure> {
    if s.turned_away > 0 {
        eprintln!(
            "warning: {} connection(s) to the data ports did not open with this session's \
             ticket and were closed unread (a port scanner, or someone else's sender)",
            s.turned_away
        );
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({"peer": s.peer.to_string(), "files": s.files, "present_files": s.present, "replaced_files": s.replaced, "bytes": s.bytes, "turned_away": s.turned_away})
        )?;
    } else {
        outln!(
            "received {}, {} bytes, from {}{}{}",
            files(s.files),
            s.bytes,
            s.peer,
            files_were(s.present, "here already, the same, and not sent"),
            files_were(s.replaced, "replaced here"),
        )?;
    }
    Ok(())
}

/// The receiver's address from `HOST[:PORT]`: a name or an IPv4 address with an
/// optional port, an IPv6 address bare (`::1`) or in brackets (`[::1]:7070`); the
/// port defaults to [`DEFAULT_PORT`]. A port out of 1..=65535 is an error saying so
/// (it used to be taken as part of the host name: "failed to lookup address").
fn resolve_dest(dest: &str) -> Result<SocketAddr, Failure> {
    let bad = |m: String| Failure::input(anyhow::anyhow!("`{dest}`: {m}"));
    if let Ok(ip) = dest.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let port = dest.rsplit_once(':').map(|(_, p)| p);
    let with_port = match port.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        Some(p) if p.parse::<u16>().is_ok_and(|n| n > 0) => dest.to_string(),
        Some(p) => return Err(bad(format!("port {p} is not from 1 to 65535"))),
        None => format!("{dest}:{DEFAULT_PORT}"),
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to no address".into()))
}

#[allow(clippy::disallowed_methods)] // the wall time of a transfer, for its rate
pub fn send_cmd(a: SendArgs) -> Result<(), Failure> {
    let token = a.token.token()?;
    let (dest, paths) = a.args.split_last().expect("clap requires one");
    let synthetic =
        match &a.synthetic {
            None if paths.is_empty() => {
                return Err(Failure::input(anyhow::anyhow!(
                    "give the files to send before HOST[:PORT] (or --synthetic SIZE)"
                )))
            }
            None => None,
            Some(_) if !paths.is_empty() => {
                return Err(Failure::input(anyhow::anyhow!(
                    "--synthetic sends a generated file: give only HOST[:PORT], no paths"
                )))
            }
            Some(z) => Some(longhaul_model::units::parse_size(z).map_err(|e| {
                Failure::input(anyhow::anyhow!("--synthetic `{z}`: {e} (e.g. 10GiB)"))
            })?),
        };
    let dest = resolve_dest(dest)?;
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    for p in &paths {
        let why = match std::fs::metadata(p) {
            Ok(m) if m.is_file() || m.is_dir() => continue,
            Ok(_) => "not a regular file or a directory (only those are sent)",
            Err(_) if std::fs::symlink_metadata(p).is_ok() => {
                "a symbolic link to nothing (a path given is followed)"
            }
            Err(_) => "no such file or directory",
        };
        return Err(Failure::input(anyhow::anyhow!("{}: {why}", p.display())));
    }
    let block_size = longhaul_model::units::parse_size(&a.block_size)
        .ok()
        .filter(|b| (1..=256 << 20).contains(b))
        .ok_or_else(|| {
            Failure::input(anyhow::anyhow!(
                "--block-size `{}`: give 1 B to 256 MiB, e.g. 4MiB",
                a.block_size
            ))
        })? as u32;
    let total_channels = u32::from(a.channels) * u32::from(a.concurrency);
    if a.channels == 0 || a.concurrency == 0 || total_channels > 256 {
        return Err(Failure::input(anyhow::anyhow!(
            "--channels {} × --concurrency {} must be 1 to 256 channels in all",
            a.channels,
            a.concurrency
        )));
    }
    let total_channels = total_channels as u16;
    check_mss(a.mss)?;
    let max_bw_bps = match &a.rate_limit {
        None => None,
        Some(_) if a.transport == "tcp" => {
            return Err(Failure::input(anyhow::anyhow!(
                "--rate-limit applies to UDT channels; with --transport tcp the kernel's \
                 TCP sets the pace (leave --rate-limit out, or use --transport udt)"
            )))
        }
        Some(r) => {
            let total = longhaul_model::units::parse_rate(r)
                .map_err(|e| Failure::input(anyhow::anyhow!("--rate-limit: {e}")))?;
            Some((total.as_bps() / u64::from(total_channels)).max(1))
        }
    };
    let mut rate_control =
        RateControl::from_name(&a.cc, UdtConnConfig::default().rate_control.udt_config())
            .map_err(|e| Failure::input(anyhow::anyhow!("--cc: {e}")))?;
    // BBR makes room for what UDT's receivers hold before they acknowledge:
    // without it four coupled channels over loopback crawled at 84-232 Mb/s in
    // about half the runs (docs/bbr.md, "Receivers that hold their ACKs").
    if let RateControl::Bbr(b) = &mut rate_control {
        b.ack_hold = true;
    }
    let shareable = a.transport != "tcp" && matches!(rate_control, RateControl::Bbr(_));
    if a.couple && !shareable {
        return Err(Failure::input(anyhow::anyhow!(
            "--couple: only UDT channels running BBR share a model; use it with --cc bbr-lh, bbr or bbr-v3 over UDT, or leave it out"
        )));
    }
    // Coupled unless asked not to, where there is a model to share.
    let couple = shareable && !a.no_couple;
    if let Some(p) = &a.block_log {
        crate::writable("block-log", p)?;
    }
    let progress = Arc::new(AtomicU64::new(0));
    let mut opts = SendOptions {
        synthetic,
        channels: a.channels,
        concurrency: a.concurrency,
        pipelining: !a.no_pipelining,
        block_log: a.block_log.clone(),
        transport: if a.transport == "tcp" {
            Transport::Tcp
        } else {
            Transport::Udt
        },
        block_size,
        udt: udt_buffers(
            UdtConnConfig {
                mss: a.mss,
                rate_control,
                max_bw_bps,
                ..UdtConnConfig::default()
            },
            a.udt_buffer,
        )?,
        couple,
        progress: Some(progress.clone()),
        encrypt: !a.token.no_encryption,
        ..SendOptions::new(paths, dest, &token)
    };
    let need = longhaul_net::transfer::session_memory(
        total_channels,
        opts.block_size,
        opts.transport,
        &opts.udt,
    );
    let cap = memory_cap(&a.memory_cap)?;
    if need > cap {
        return Err(Failure::input(anyhow::anyhow!(
            "{} channels of {} blocks would need {} MiB of buffers; at most {} MiB: use fewer channels or smaller blocks",
            total_channels,
            a.block_size,
            need >> 20,
            cap >> 20
        )));
    }
    let total: u64 = match synthetic {
        Some(n) => n,
        None => {
            // Every failure here is about the paths given, before any connection.
            let listing =
                longhaul_net::transfer::list_files(&opts.paths).map_err(Failure::input)?;
            for (kind, what) in [
                (
                    Skip::Special,
                    "symbolic link(s) or special file(s) inside the directories given (only \
                     regular files are sent; links inside a tree are not followed)",
                ),
                (
                    Skip::Partial,
                    "partial file(s) of an interrupted `longhaul recv` inside the directories \
                     given (.NAME.longhaul-part, .NAME.longhaul-journal: no receiver takes them)",
                ),
                (
                    Skip::NotUtf8,
                    "file(s) or folder(s) whose names are not UTF-8, which names in \
                     longhaul's protocol are (they would arrive renamed): rename them to send them",
                ),
            ] {
                let paths: Vec<PathBuf> = listing
                    .skipped
                    .iter()
                    .filter(|s| s.1 == kind)
                    .map(|s| s.0.clone())
                    .collect();
                warn_not_sent(&paths, what);
            }
            let total = listing.files.iter().map(|f| f.size).sum();
            // What is sent is what was counted: the trees are not walked again.
            opts.listing = Some(listing);
            total
        }
    };
    let start = std::time::Instant::now();
    if a.json_stream {
        outln!(
            "{}",
            serde_json::json!({"event": "start", "data": {"bytes_total": total, "channels": total_channels, "concurrency": a.concurrency, "pipelining": !a.no_pipelining, "transport": a.transport, "coupled": couple}})
        )?;
    }
    let done = Arc::new(AtomicBool::new(false));
    let reporter = {
        let (progress, done, stream) = (progress.clone(), done.clone(), a.json_stream);
        let bar = (!stream && !a.json && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                )
                .expect("a valid template"),
            );
            b
        });
        std::thread::spawn(move || {
            let mut last = (0u64, 0.0f64);
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(if stream { 1000 } else { 200 }));
                let (bytes, t) = (
                    progress.load(Ordering::Relaxed),
                    start.elapsed().as_secs_f64(),
                );
                if let Some(b) = &bar {
                    b.set_position(bytes);
                }
                if stream && !done.load(Ordering::Relaxed) {
                    let (db, dt) = (bytes - last.0, t - last.1);
                    let line = outln!(
                        "{}",
                        serde_json::json!({"event": "interval", "data": {"sum": {
                            "start": last.1, "end": t, "seconds": dt, "bytes": db,
                            "bits_per_second": db as f64 * 8.0 / dt.max(1e-9)}}})
                    );
                    if line.is_err() {
                        break; // nobody reads the stream any more
                    }
                    last = (bytes, t);
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        })
    };
    if opts.transport == Transport::Udt {
        let any = std::net::IpAddr::from([0, 0, 0, 0]);
        if let Ok(Some(w)) = longhaul_net::socket_buffer_warning(any) {
            eprintln!("warning: {w}");
        }
    }
    let result = send(&opts);
    done.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let s = result?;
    let secs = start.elapsed().as_secs_f64();
    let gbps = s.bytes as f64 * 8.0 / secs.max(1e-9) / 1e9;
    let summary = serde_json::json!({"files": s.files, "folders": s.folders, "present_files": s.present, "replaced_files": s.replaced, "differing_files": s.differ, "bytes": s.bytes, "blocks": s.blocks, "resent_blocks": s.resent, "pieces": s.pieces, "resumed_blocks": s.skipped, "changed_blocks": s.changed, "modified_while_sent": s.modified, "confirmation_waits": s.confirmation_waits, "handshake_seconds": s.handshake.as_secs_f64(), "channel_seconds": s.channel_finished.iter().map(|d| d.as_secs_f64()).collect::<Vec<_>>(), "seconds": secs, "bits_per_second": gbps * 1e9, "coupled": couple});
    if a.json_stream {
        outln!(
            "{}",
            serde_json::json!({"event": "end", "data": {"sum": summary}})
        )?;
    } else if a.json {
        outln!("{summary}")?;
    } else {
        let resumed = match (s.skipped, s.changed) {
            (0, 0) => String::new(),
            (k, 0) => format!("; resumed: {k} blocks the receiver held were not sent again"),
            (k, c) => format!(
                "; resumed: {k} blocks the receiver held were not sent again, {c} that had \
                 changed here since were"
            ),
        };
        let present = files_were(s.present, "at the receiver already, the same, and not sent")
            + &files_were(
                s.replaced,
                "replaced at the receiver, which held other contents",
            );
        // A tree of empty folders sends no file, but its folders arrive.
        let folders = match (s.files + s.present, s.folders) {
            (0, 1) => " (and 1 folder)".to_string(),
            (0, n) if n > 1 => format!(" (and {n} folders)"),
            _ => String::new(),
        };
        outln!(
            "sent {}{folders}, {} bytes in {secs:.2} s ({gbps:.2} Gb/s), verified by the receiver{resumed}{present}",
            files(s.files),
            s.bytes
        )?;
    }
    // What failed, all of it: each says what to do.
    let mut failed = vec![];
    if !s.differ.is_empty() {
        failed.push(format!(
            "{} file(s) at the receiver have the size of the ones here but other contents, \
             and were neither sent nor replaced: {}; to replace them, start the receiver \
             with `longhaul recv --overwrite`",
            s.differ.len(),
            s.differ.join(", ")
        ));
    }
    if !s.modified.is_empty() {
        // As Globus fails a file whose checksum moved during the transfer: the copy
        // is what was read, block by block, not one version of the file.
        failed.push(format!(
            "{} file(s) were written to while being sent, so the receiver's copy may mix \
             old and new contents (each block is as it was read): {}; send them again \
             when they are quiet (to `longhaul recv --overwrite`)",
            s.modified.len(),
            s.modified.join(", ")
        ));
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(anyhow::anyhow!("{}", failed.join("; and ")).into())
}

/// "1 file", "2 files".
fn files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

/// A summary's clause about `n` files: "; 1 file was WHAT", "; 2 files were WHAT",
/// nothing for none.
fn files_were(n: usize, what: &str) -> String {
    match n {
        0 => String::new(),
        1 => format!("; 1 file was {what}"),
        n => format!("; {n} files were {what}"),
    }
}

/// Warns on stderr that `paths` (if any) were not sent, and why: the first five
/// named, and how many more.
fn warn_not_sent(paths: &[PathBuf], what: &str) {
    if paths.is_empty() {
        return;
    }
    let shown: Vec<String> = paths
        .iter()
        .take(5)
        .map(|p| p.display().to_string())
        .collect();
    let more = match paths.len() - shown.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    eprintln!(
        "warning: not sent: {} {what}: {}{more}",
        paths.len(),
        shown.join(", ")
    );
}

/// `--data-ports`: `LO-HI` or one port, within 1..=65535, LO at most HI.
fn data_ports(s: &str) -> Result<std::ops::RangeInclusive<u16>, Failure> {
    let bad = || {
        Failure::input(anyhow::anyhow!(
            "--data-ports `{s}`: give LO-HI (e.g. 50000-50100) or one port, from 1 to 65535"
        ))
    };
    let port = |p: &str| p.trim().parse::<u16>().ok().filter(|&p| p > 0);
    let (lo, hi) = match s.split_once('-') {
        Some((lo, hi)) => (port(lo).ok_or_else(bad)?, port(hi).ok_or_else(bad)?),
        None => {
            let p = port(s).ok_or_else(bad)?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(bad());
    }
    Ok(lo..=hi)
}

/// `--memory-cap`: a size of at least 1 MiB.
fn memory_cap(s: &str) -> Result<u64, Failure> {
    longhaul_model::units::parse_size(s)
        .ok()
        .filter(|&b| b >= 1 << 20)
        .ok_or_else(|| {
            Failure::input(anyhow::anyhow!(
                "--memory-cap `{s}`: give a size of at least 1 MiB, e.g. 512MiB"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_addresses() {
        let ok = |s: &str| match resolve_dest(s) {
            Ok(a) => a.to_string(),
            Err(e) => panic!("{s}: {}", e.error),
        };
        assert_eq!(ok("127.0.0.1"), "127.0.0.1:7070");
        assert_eq!(ok("127.0.0.1:9"), "127.0.0.1:9");
        assert_eq!(ok("::1"), "[::1]:7070");
        assert_eq!(ok("[::1]"), "[::1]:7070");
        assert_eq!(ok("[::1]:9"), "[::1]:9");
        for (s, why) in [
            ("127.0.0.1:99999", "port 99999 is not from 1 to 65535"),
            ("127.0.0.1:0", "port 0 is not from 1 to 65535"),
        ] {
            let Err(e) = resolve_dest(s) else {
                panic!("{s} accepted")
            };
            assert!(e.input, "{s}: an input error");
            let e = e.error.to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
