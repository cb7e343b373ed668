//! The sending side: [`send`] connects, proves the token, offers the files and
//! runs the channels; [`listing`] finds what to send, [`sched`] hands out blocks,
//! [`source`] reads them, [`mod@verdicts`] hears the receiver.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::cc::BbrGroup;
use longhaul_proto::transfer::HEADER_LEN;
use longhaul_proto::udt::{RateControl, UdtConnConfig};

use self::buffers::BlockBuffers;
use super::channel::{DataChannel, Seal};
use super::control::{ControlWriter, DirEntry, FileEntry, Msg, Side};
use super::raw::open_session;
use super::{TransferError, END_OF_CHANNEL, PIECE_FOLLOWS};
use crate::secure::{self};
use crate::udt::RateGroup;
use crate::Impairment;

mod buffers;
mod listing;
mod sched;
mod source;
mod verdicts;

pub use listing::{list_files, ListedDir, ListedFile, Listing, Skip};
use sched::{digest_of, split, Digest, FileState, Lane, Next, Piece, Sched, Shared};
use source::read_block;
pub use source::synthetic_fill;
use verdicts::{send_digest, verdicts, Resends};

/// How to send.
#[derive(Debug, Clone)]
pub struct SendOptions {
    /// Files and directories (sent recursively, under their own names).
    pub paths: Vec<PathBuf>,
    /// The files under `paths` as [`list_files`] found them, for a caller that has
    /// listed them already (to show the total, to warn of what is left out): the
    /// session sends exactly these instead of walking the trees again, so the
    /// total shown is the total sent. `None`: `send` lists `paths` itself.
    pub listing: Option<Listing>,
    /// Instead of `paths`, one generated file of this many bytes named
    /// `synthetic` (see [`synthetic_fill`]): measures the path and both hosts'
    /// CPUs without the sender's disk.
    pub synthetic: Option<u64>,
    /// The receiver's control address.
    pub dest: SocketAddr,
    /// The pre-shared token (at least 128 bits: [`crate::secure::check_token`]).
    pub token: String,
    /// Whether the data channels are encrypted (the control channel always is);
    /// off (`--no-encryption`) only if the receiver's is off too.
    pub encrypt: bool,
    /// Data channels per file (parallelism): a file is striped over this many.
    pub channels: u16,
    /// Files in flight at once, each on its own group of `channels` channels (so
    /// the session opens `channels × concurrency`).
    pub concurrency: u16,
    /// Whether a channel group starts its next file before the receiver has
    /// confirmed the last (on: files follow each other without a round trip; off:
    /// one confirmation round trip per file, as FTP without pipelining).
    pub pipelining: bool,
    /// Appends a line per block handed to a channel (`block FILE OFFSET LEN
    /// CHANNEL`), per piece of a split block sent (`piece FILE OFFSET LEN
    /// CHANNEL`) and per confirmation (`done FILE ok|failed`): what was sent, for
    /// audits and for measuring what a resume sends again.
    pub block_log: Option<PathBuf>,
    /// What they run.
    pub transport: super::Transport,
    /// Block size, bytes.
    pub block_size: u32,
    /// UDT parameters (socket IDs are set per channel).
    pub udt: UdtConnConfig,
    /// Whether the channels' senders share one BBR model (when `udt`'s control is
    /// BBR), so that to the path they are one flow; as separate flows they
    /// overshoot it together (docs/bbr.md, "Coupled channels"). On by default.
    pub couple: bool,
    /// How long to wait for the receiver at each step.
    pub timeout: Duration,
    /// Faults to inject into the data channels' datagrams (tests).
    pub impair: Option<Impairment>,
    /// File bytes the receiver has confirmed storing (its `Progress` messages,
    /// about ten a second), for a progress display.
    pub progress: Option<Arc<AtomicU64>>,
    /// Stop after handing this many blocks to the channels, dropping the session
    /// as a crash would (tests of resume).
    pub stop_after_blocks: Option<u64>,
}

impl SendOptions {
    /// `paths` to the receiver at `dest` with `token`, on `longhaul send`'s
    /// defaults: 4 UDT channels, one file at a time, pipelined, 4 MiB blocks,
    /// UDT4's parameters, the channels sharing one BBR model, 30 s per step; no
    /// log, progress counter or faults.
    pub fn new(paths: Vec<PathBuf>, dest: SocketAddr, token: &str) -> Self {
        SendOptions {
            paths,
            listing: None,
            synthetic: None,
            dest,
            token: token.into(),
            encrypt: true,
            channels: 4,
            concurrency: 1,
            pipelining: true,
            block_log: None,
            transport: super::Transport::Udt,
            block_size: 4 << 20,
            udt: UdtConnConfig::default(),
            couple: true,
            timeout: Duration::from_secs(30),
            impair: None,
            progress: None,
            stop_after_blocks: None,
        }
    }
}

/// What a send did.
#[derive(Debug, Clone)]
pub struct SendSummary {
    /// Files sent and confirmed.
    pub files: usize,
    /// Folders made at the receiver (or there already), empty ones included.
    pub folders: usize,
    /// Files the receiver held whole already, the same as here (their digests
    /// matched): not sent.
    pub present: usize,
    /// Files the receiver held of the same name and size but other contents: not
    /// sent, and left as they are there (the receiver replaces files only with
    /// `recv --overwrite`). By name at the receiver.
    pub differ: Vec<String>,
    /// Files the receiver held of the same name and size but other contents,
    /// sent whole to replace them (`recv --overwrite`); counted in `files` too.
    pub replaced: usize,
    /// Bytes of file data sent.
    pub bytes: u64,
    /// Blocks sent.
    pub blocks: u64,
    /// Blocks sent again because they arrived damaged.
    pub resent: u64,
    /// Pieces sent: the last blocks of the last file go split over the channels
    /// (each counted in `blocks` once).
    pub pieces: u64,
    /// Times a channel group waited for a confirmation before its next file (only
    /// without pipelining).
    pub confirmation_waits: u64,
    /// Blocks not sent because the receiver held them from an interrupted session
    /// (not counting the blocks of files it held whole, [`Self::present`]).
    pub skipped: u64,
    /// Blocks the receiver held from an interrupted session that no longer match
    /// the file here (it changed since), sent again (counted in `blocks` too).
    pub changed: u64,
    /// From the control connection's start to the session's keys: TCP's round trip
    /// and the handshake's.
    pub handshake: Duration,
    /// When each data channel had all its data acknowledged, from the channels'
    /// start: how evenly the blocks were spread over them.
    pub channel_finished: Vec<Duration>,
    /// Files written to (their size or modification time moved) while their blocks
    /// were read: each block arrived as it was read and checked out, but the copy
    /// may mix the file's old and new contents. By name at the receiver.
    pub modified: Vec<String>,
}

/// Sends the files under `opts.paths` to a `longhaul recv` at `opts.dest`.
pub fn send(opts: &SendOptions) -> Result<SendSummary, TransferError> {
    secure::check_token(&opts.token).map_err(TransferError::WeakToken)?;
    let block_key = secure::block_key(&opts.token);
    let (files, dirs) = match (opts.synthetic, &opts.listing) {
        // An empty path marks the generated file.
        (Some(n), _) => {
            let file = ListedFile {
                source: PathBuf::new(),
                name: "synthetic".into(),
                size: n,
                mode: 0o644,
                mtime: None,
            };
            (vec![file], vec![])
        }
        (None, Some(listing)) => (listing.files.clone(), listing.dirs.clone()),
        (None, None) => {
            let listing = list_files(&opts.paths)?;
            (listing.files, listing.dirs)
        }
    };
    if opts.channels == 0 || opts.concurrency == 0 {
        return Err(TransferError::Protocol(
            "channels and concurrency must be at least 1".into(),
        ));
    }
    let total_channels = opts
        .channels
        .checked_mul(opts.concurrency)
        .ok_or_else(|| TransferError::Protocol("channels × concurrency is too many".into()))?;
    let log = opts
        .block_log
        .as_ref()
        .map(|p| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(TransferError::io(p.display().to_string()))
        })
        .transpose()?;
    let clock = crate::clock::Clock::new();
    // After the handshake, a step's wait or longer: the receiver reads back what
    // it holds before it answers the offer (saying how far it got).
    let then_wait = opts.timeout.max(Duration::from_secs(600));
    let (mut ctl, keys) = open_session(
        opts.dest,
        &opts.token,
        opts.encrypt,
        opts.timeout,
        then_wait,
    )?;
    let handshake = Duration::from_nanos(clock.now().as_nanos());
    ctl.send(&Msg::Offer {
        files: files
            .iter()
            .map(|f| FileEntry {
                path: f.name.clone(),
                size: f.size,
                mode: Some(f.mode),
                mtime: f.mtime,
            })
            .collect(),
        dirs: dirs
            .iter()
            .map(|d| DirEntry {
                path: d.name.clone(),
                mode: Some(d.mode),
            })
            .collect(),
        channels: total_channels,
        block_size: opts.block_size,
        transport: opts.transport,
    })?;
    // The receiver may first read back what it holds, saying how far it got.
    let mut reply = ctl.recv()?;
    while let Msg::Checking { .. } = reply {
        reply = ctl.recv()?;
    }
    let (ports, have, present, replace) = match reply {
        Msg::Accept {
            ports,
            have,
            present,
            replace,
        } if ports.len() == usize::from(total_channels) => {
            let have = have
                .into_iter()
                .map(|blocks| {
                    blocks
                        .into_iter()
                        .map(|(o, h)| Some((o, hex::decode(&h).ok()?.try_into().ok()?)))
                        .collect::<Option<HashMap<u64, [u8; 32]>>>()
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| TransferError::Protocol("a bad block hash in Accept".into()))?;
            let mut whole = vec![None; files.len()];
            for (i, digest) in present {
                let d = hex::decode(&digest)
                    .ok()
                    .and_then(|d| <[u8; 32]>::try_from(d).ok());
                match (whole.get_mut(i as usize), d) {
                    (Some(slot), Some(d)) => *slot = Some(d),
                    _ => {
                        return Err(TransferError::Protocol(format!(
                            "a bad file held whole in Accept: {i}, {digest}"
                        )))
                    }
                }
            }
            (ports, have, whole, replace)
        }
        Msg::Reject { reason } => {
            return Err(TransferError::Protocol(format!(
                "the receiver refused: {reason}"
            )))
        }
        m => {
            return Err(TransferError::Protocol(format!(
                "expected the channels' ports, got {m:?}"
            )))
        }
    };
    let (reader, writer) = ctl.split()?;
    let writer = Arc::new(Mutex::new(writer));
    let sizes: Vec<u64> = files.iter().map(|f| f.size).collect();
    let sources: Arc<Vec<PathBuf>> = Arc::new(files.iter().map(|f| f.source.clone()).collect());
    let shared: Shared = Arc::new(Mutex::new(Sched {
        next_file: 0,
        lanes: (0..opts.concurrency).map(|_| Lane::default()).collect(),
        files: sizes
            .iter()
            .map(|&s| FileState::new(s.div_ceil(u64::from(opts.block_size)) as usize))
            .collect(),
        sizes: sizes.clone(),
        block_size: opts.block_size,
        pipelining: opts.pipelining,
        have,
        present,
        replace,
        redo: std::collections::VecDeque::new(),
        differ: vec![],
        sources: sources.clone(),
        handed: 0,
        limit: opts.stop_after_blocks.unwrap_or(u64::MAX),
        confirmation_waits: 0,
        abort: None,
        lane_channels: u32::from(opts.channels),
        pieces: std::collections::VecDeque::new(),
        splitting: 0,
        tail: false,
        split_budget: u32::from(total_channels),
        log,
    }));
    // An empty file has no block to finish it: its digest (of nothing) goes now.
    for (i, _) in sizes.iter().enumerate().filter(|(_, &s)| s == 0) {
        let d = Digest {
            digest: digest_of(vec![]),
            changed: vec![],
            replaced: false,
        };
        send_digest(&writer, i, d)?;
    }
    let verdicts = {
        let (shared, writer, sources) = (shared.clone(), writer.clone(), sources.clone());
        let resends = Resends {
            sources,
            sizes,
            block_size: opts.block_size,
            block_key,
        };
        let progress = opts.progress.clone();
        thread::spawn(move || verdicts(reader, &shared, &writer, &resends, progress))
    };
    let mut threads = vec![];
    let clock = crate::clock::Clock::new();
    let group = match opts.udt.rate_control {
        RateControl::Bbr(b) if opts.couple && opts.transport == super::Transport::Udt => {
            Some(RateGroup {
                model: BbrGroup::new(b, opts.udt.mss, u32::from(total_channels), clock.now()),
                clock,
            })
        }
        _ => None,
    };
    for (c, port) in ports.into_iter().enumerate() {
        let addr = SocketAddr::new(opts.dest.ip(), port);
        let cfg = UdtConnConfig {
            // Random, as UDT4's are: a stranger cannot guess what a forged
            // packet must carry.
            socket_id: u32::from_be_bytes(secure::random_bytes()).max(1),
            isn: u32::from_be_bytes(secure::random_bytes()) & 0x3fff_ffff,
            ..opts.udt
        };
        let job = ChannelJob {
            c,
            lane: c / usize::from(opts.channels),
            addr,
            cfg,
            transport: opts.transport,
            timeout: opts.timeout,
            impair: opts.impair,
            ticket: keys.ticket(c),
            seal: Seal::new(&keys, c, Side::Sender, opts.transport, opts.encrypt),
            shared: shared.clone(),
            writer: writer.clone(),
            sources: sources.clone(),
            block_size: opts.block_size,
            block_key,
            clock,
            group: group.clone(),
        };
        threads.push(thread::spawn(move || {
            let shared = job.shared.clone();
            let r = job.run();
            if let Err(e) = &r {
                // The others stop too (none waits for pieces this one will not
                // split).
                shared.lock().expect("no panics hold it").abort = Some(e.to_string());
            }
            r
        }));
    }
    let (mut bytes, mut blocks, mut skipped, mut changed, mut pieces) = (0, 0, 0, 0, 0);
    let mut channel_finished = vec![];
    let mut failure = None;
    for t in threads {
        match t.join().expect("channel thread") {
            Ok(sent) => {
                bytes += sent.bytes;
                blocks += sent.blocks;
                skipped += sent.skipped;
                changed += sent.changed;
                pieces += sent.pieces;
                channel_finished.push(sent.finished);
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    let crashed = opts.stop_after_blocks.is_some_and(|l| blocks >= l);
    if failure.is_some() || crashed {
        // Leave: the receiver keeps what came, for a later session to resume. (A
        // test's crash leaves this way too.) A receiver that failed says why on the
        // control channel as its channels end: give that a moment to arrive, and
        // tell it rather than the broken channel it caused.
        if failure.is_some() {
            let clock = crate::clock::Clock::new();
            while !verdicts.is_finished() && clock.now().as_nanos() < 2_000_000_000 {
                thread::sleep(Duration::from_millis(10));
            }
        }
        // Closing the control channel ends the verdict thread.
        let _ = writer.lock().expect("no panics hold it").shutdown();
        if let Ok(Err(e @ TransferError::ReceiverGaveUp(_))) = verdicts.join() {
            return Err(e);
        }
        return Err(failure.unwrap_or_else(|| {
            TransferError::Protocol(format!("stopped after {blocks} blocks, as asked"))
        }));
    }
    let (bad, resent) = verdicts.join().expect("verdict thread")?;
    let (confirmation_waits, modified, differ, present, replaced) = {
        let s = shared.lock().expect("no panics hold it");
        let modified = (s.files.iter().zip(&files))
            .filter(|(f, _)| f.modified)
            .map(|(_, l)| l.name.clone())
            .collect::<Vec<_>>();
        let present = s.present.iter().flatten().count() - s.differ.len();
        (
            s.confirmation_waits,
            modified,
            s.differ.clone(),
            present,
            s.files.iter().filter(|f| f.replaced).count(),
        )
    };
    // Files the receiver holds with other contents fail there too: they are
    // reported as such, not as files that could not be verified.
    let differing: std::collections::HashSet<usize> = differ.iter().copied().collect();
    let bad: Vec<usize> = bad.into_iter().filter(|i| !differing.contains(i)).collect();
    let differ: Vec<String> = differ.iter().map(|&i| files[i].name.clone()).collect();
    if !bad.is_empty() {
        let names: Vec<String> = bad
            .iter()
            .map(|&i| files.get(i).map_or("?".into(), |f| f.name.clone()))
            .collect();
        return Err(TransferError::Integrity(format!(
            "the receiver could not verify: {}",
            names.join(", ")
        )));
    }
    Ok(SendSummary {
        files: files.len() - present - differ.len(),
        folders: dirs.len(),
        present,
        replaced,
        differ,
        bytes,
        blocks,
        resent,
        pieces,
        skipped,
        changed,
        modified,
        confirmation_waits,
        handshake,
        channel_finished,
    })
}

/// One data channel's work: connect, present the ticket, send the blocks the
/// schedule hands this channel (reading and hashing each; held blocks only
/// hashed), end with the end marker.
struct ChannelJob {
    c: usize,
    lane: usize,
    addr: SocketAddr,
    cfg: UdtConnConfig,
    transport: super::Transport,
    timeout: Duration,
    impair: Option<Impairment>,
    ticket: [u8; 32],
    seal: Seal,
    shared: Shared,
    writer: Arc<Mutex<ControlWriter>>,
    sources: Arc<Vec<PathBuf>>,
    block_size: u32,
    block_key: [u8; 32],
    /// The session's clock, shared by its channels (when each finished).
    clock: crate::clock::Clock,
    /// The BBR model the channels share, if they do.
    group: Option<RateGroup>,
}

/// The least of the written data a channel keeps unsent before it takes another
/// block: an eighth of a block, or 20 ms of its sending if more (see
/// `UdtSocket::drain_below`). A channel asks for a block only when nearly done
/// with the last, so when the blocks run out none holds a queue of them
/// (docs/transfer.md has what it changed).
const CUSHION_TIME: Duration = Duration::from_millis(20);

/// What a channel sent.
#[derive(Debug, Default)]
struct Sent {
    /// File bytes sent.
    bytes: u64,
    blocks: u64,
    /// Held by the receiver from an interrupted session: hashed, not sent.
    skipped: u64,
    /// Held by the receiver but changed here since: sent again.
    changed: u64,
    /// Pieces of split blocks sent (the blocks are counted where they were read).
    pieces: u64,
    /// When it had everything acknowledged, on the session's clock.
    finished: Duration,
}

impl ChannelJob {
    fn run(self) -> Result<Sent, TransferError> {
        let ChannelJob {
            c,
            lane,
            addr,
            cfg,
            transport,
            timeout,
            impair,
            ticket,
            seal,
            shared,
            writer,
            sources,
            block_size,
            block_key,
            clock,
            group,
        } = self;
        let mut s = DataChannel::connect(transport, addr, cfg, timeout, seal, group.as_ref())?;
        if let (Some(i), Some(u)) = (impair, s.udt()) {
            u.impair(Impairment {
                seed: i.seed ^ c as u64,
                ..i
            });
        }
        s.write_all(&ticket)?;
        // Blocks are handed out in file order, so a channel keeps only the
        // file it is reading open: a tree of 100 000 files must not hold
        // 100 000 descriptors.
        let mut open: Option<(u32, File)> = None;
        let mut blocks = BlockBuffers::new(HEADER_LEN + block_size as usize + 32);
        let mut sent = Sent::default();
        loop {
            // In the tail (pieces), only the time: a piece is read already, so
            // there is nothing to prepare while the last one drains.
            let tail = shared.lock().expect("no panics hold it").tail;
            let cushion = if tail { 0 } else { (block_size / 8) as usize };
            s.drain_below(cushion, CUSHION_TIME)?;
            let next = shared.lock().expect("no panics hold it").next(lane, c);
            let (b, held, whole, pieces) = match next {
                Next::Block(b, held, whole, pieces) => (b, held, whole, pieces),
                Next::Piece(p) => {
                    write_piece(&mut s, &p, &block_key, &shared, c)?;
                    sent.pieces += 1;
                    continue;
                }
                Next::Done => break,
                Next::Wait => {
                    // Keep the channel going while the receiver confirms, or
                    // while another channel reads a block to split.
                    s.idle(Duration::from_millis(1))?;
                    continue;
                }
            };
            let n = b.len as usize;
            let mut buf = blocks.take(HEADER_LEN + n + 32);
            b.emit(&mut buf[..HEADER_LEN]);
            let data = &mut buf[HEADER_LEN..HEADER_LEN + n];
            read_block(&sources, &mut open, b.file, data, b.offset)?;
            let h = *blake3::keyed_hash(&block_key, data).as_bytes();
            buf[HEADER_LEN + n..HEADER_LEN + n + 32].copy_from_slice(&h);
            let differs = held.is_some_and(|held| held != h);
            if differs {
                shared.lock().expect("no panics hold it").changed(&b, c);
                sent.changed += 1;
            }
            if pieces > 1 {
                // Sent in pieces: this channel sends the first, the others go to
                // whichever channels ask next.
                let frame = buf.freeze();
                let mut parts = split(&b, pieces).into_iter().map(|p| {
                    let at = HEADER_LEN + (p.offset - b.offset) as usize;
                    Piece {
                        repr: p,
                        data: frame.slice(at..at + p.len as usize),
                    }
                });
                let first = parts.next().expect("at least one piece");
                {
                    let mut sh = shared.lock().expect("no panics hold it");
                    sh.pieces.extend(parts);
                    sh.splitting -= 1;
                }
                write_piece(&mut s, &first, &block_key, &shared, c)?;
                blocks.lent(frame);
                sent.pieces += 1;
                sent.bytes += u64::from(b.len);
                sent.blocks += 1;
            } else if (held.is_none() && !whole) || differs {
                let frame = buf.freeze();
                s.write_block(&frame)?;
                blocks.lent(frame);
                sent.bytes += u64::from(b.len);
                sent.blocks += 1;
            } else {
                blocks.give_back(buf);
                if !whole {
                    sent.skipped += 1;
                }
            }
            // After the block is on its way: the digest follows its blocks.
            let digest = shared.lock().expect("no panics hold it").hashed(&b, h);
            if let Some(d) = digest {
                send_digest(&writer, b.file as usize, d)?;
            }
        }
        s.write_all(&END_OF_CHANNEL)?;
        s.finish(timeout.max(Duration::from_secs(60)))?;
        sent.finished = Duration::from_nanos(clock.now().as_nanos());
        Ok(sent)
    }
}

/// Sends piece `p` of a block on channel `c` (and logs it): the marker, its
/// header, its bytes and its own keyed hash, by which the receiver checks it
/// before it gathers the block.
fn write_piece(
    s: &mut DataChannel,
    p: &Piece,
    block_key: &[u8; 32],
    shared: &Shared,
    c: usize,
) -> Result<(), TransferError> {
    let mut head = [0u8; 2 * HEADER_LEN];
    head[..HEADER_LEN].copy_from_slice(&PIECE_FOLLOWS);
    p.repr.emit(&mut head[HEADER_LEN..]);
    s.write_all(&head)?;
    s.write_block(&p.data)?;
    s.write_all(blake3::keyed_hash(block_key, &p.data).as_bytes())?;
    let r = p.repr;
    shared
        .lock()
        .expect("no panics hold it")
        .log(format_args!("piece {} {} {} {c}", r.file, r.offset, r.len));
    Ok(())
}
