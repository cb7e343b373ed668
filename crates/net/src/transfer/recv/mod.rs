//! The receiving side: [`listen`] admits senders (handshakes, bounded work before
//! authentication); this module serves a session's offer, channels and commits.

mod channels;
mod incoming;
mod listen;
mod pieces;
mod prepare;
mod readback;
mod session;

use channels::{accept_sender, serve_channel, serve_control, Door};
use listen::Authenticated;
pub use listen::{Log, Server, MAX_PENDING, MAX_PER_SOURCE, PRE_AUTH_DEADLINE};
use prepare::{prepare, Offer, Prepared};
use session::{Event, Session, DRAIN_QUIET};

use std::collections::HashMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::udt::UdtConnConfig;

use super::channel::{Listener, Seal, Transport};
use super::control::{Control, Msg, Side};
use super::TransferError;
use crate::clock::Clock;
use crate::Impairment;
use nix::fcntl::{Flock, FlockArg};

/// How to receive.
#[derive(Debug, Clone)]
pub struct RecvOptions {
    /// Where files go; nothing is written outside it.
    pub dir: PathBuf,
    /// The control address to listen on.
    pub listen: SocketAddr,
    /// The pre-shared token (at least 128 bits: [`crate::secure::check_token`]).
    pub token: String,
    /// Whether the data channels are encrypted (the control channel always is);
    /// off (`--no-encryption`) only with a sender whose is off too.
    pub encrypt: bool,
    /// Where to say what strangers did (connections turned away before they
    /// authenticated); `None`: nowhere.
    pub log: Option<Log>,
    /// Whether an existing file may be replaced.
    pub overwrite: bool,
    /// Check every block and file as usual but write nothing (memory to memory:
    /// measures the path and the hosts' CPUs without the receiver's disk).
    pub discard: bool,
    /// UDT parameters (socket IDs are set per channel).
    pub udt: UdtConnConfig,
    /// How long to wait for the sender at each step.
    pub timeout: Duration,
    /// Faults to inject into the data channels' datagrams (tests).
    pub impair: Option<Impairment>,
    /// The most buffer memory a session may take here ([`super::MEMORY_CAP`] by
    /// default); a larger offer is refused before anything is set up.
    pub memory_cap: u64,
    /// Delays a test injects to open race windows; none by default.
    pub hooks: Hooks,
    /// Ports the data channels listen on (a firewall's opening, as GridFTP's
    /// `GLOBUS_TCP_PORT_RANGE`): the first free ones, one per channel. `None`: ports
    /// the system picks.
    pub data_ports: Option<std::ops::RangeInclusive<u16>>,
}

impl RecvOptions {
    /// Into `dir` for a sender that knows `token`, on `longhaul recv`'s defaults
    /// but a loopback address: listens on 127.0.0.1 at a port the system picks,
    /// never overwrites, UDT4's parameters, 30 s per step, [`super::MEMORY_CAP`].
    pub fn new(dir: PathBuf, token: &str) -> Self {
        RecvOptions {
            dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: token.into(),
            encrypt: true,
            log: None,
            overwrite: false,
            discard: false,
            udt: UdtConnConfig::default(),
            timeout: Duration::from_secs(30),
            impair: None,
            memory_cap: super::MEMORY_CAP,
            data_ports: None,
            hooks: Hooks::default(),
        }
    }
}

/// Delays a test can inject into a receiver to open race windows (none by
/// default), instead of sleeps compiled into test builds only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hooks {
    /// After the channel threads start, before the data phase begins: blocks are
    /// then stored before the session looks.
    pub pause_before_data_phase: Duration,
    /// Between claiming a block and writing it: another channel's block of the
    /// same file is stored meanwhile.
    pub pause_before_write: Duration,
    /// How often a receiver reading back what it holds tells the sender
    /// ([`readback::CHECKING_EVERY`] by default).
    pub checking_every: Duration,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            pause_before_data_phase: Duration::ZERO,
            pause_before_write: Duration::ZERO,
            checking_every: readback::CHECKING_EVERY,
        }
    }
}

/// What a receive did.
#[derive(Debug, Clone)]
pub struct RecvSummary {
    /// The sender's address.
    pub peer: SocketAddr,
    /// Files written and verified.
    pub files: usize,
    /// Files that were here whole already, the same as the sender's (by their
    /// digest): nothing of them was sent or written.
    pub present: usize,
    /// Files put in place over files that were here with other contents
    /// (`--overwrite`); counted in `files` too.
    pub replaced: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Blocks that failed their hash on arrival and were fetched again.
    pub refetched: u64,
    /// Connections to a data port that did not open with the session's ticket (a
    /// port scanner's connect, a stranger): closed unread while the port waited on
    /// for the sender.
    pub turned_away: u64,
}

/// Most channels and the largest block a sender may ask for.
const MAX_CHANNELS: u16 = 256;
const MAX_BLOCK: u32 = 256 << 20;

/// One session per directory: an exclusive lock on `opts.dir` (flock(2), so it goes
/// with the process, even killed, and leaves no file behind), held until the last
/// channel thread has written its last block. Two sessions receiving one name
/// would write one part file and journal, each checking only its own blocks, and
/// both could commit a mix. `None` when nothing is written (`discard`), or when
/// the file system cannot lock (some NFS and Lustre mounts answer `ENOLCK` or
/// `ENOSYS`): receiving there must still work, unguarded, as it did before.
fn lock_dir(opts: &RecvOptions) -> Result<Option<Arc<Flock<File>>>, TransferError> {
    if opts.discard {
        return Ok(None);
    }
    let shown = opts.dir.display().to_string();
    let dir = File::open(&opts.dir).map_err(TransferError::io(shown.clone()))?;
    match Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(Arc::new(lock))),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(TransferError::DirInUse(shown)),
        Err(_) => Ok(None),
    }
}

/// A listener per data channel: on ports the system picks, or on the first free
/// ports of `opts.data_ports` (taken ones are passed over).
fn bind_data_ports(
    opts: &RecvOptions,
    transport: Transport,
    channels: u16,
) -> Result<Vec<Listener>, TransferError> {
    let at = |port| SocketAddr::new(opts.listen.ip(), port);
    let Some(range) = &opts.data_ports else {
        return (0..channels)
            .map(|_| Listener::bind(transport, at(0)))
            .collect();
    };
    let mut listeners = vec![];
    let mut ports = range.clone();
    while listeners.len() < usize::from(channels) {
        let Some(port) = ports.next() else {
            return Err(TransferError::Protocol(format!(
                "{channels} data channels asked for, and the receiver's data ports {}-{} \
                 have only {} free: use fewer channels, or give the receiver a wider \
                 --data-ports range",
                range.start(),
                range.end(),
                listeners.len()
            )));
        };
        // Taken (by another program, or another session): the next one.
        if let Ok(l) = Listener::bind(transport, at(port)) {
            listeners.push(l);
        }
    }
    Ok(listeners)
}

/// Serves one session: authenticates a sender, takes its files into `opts.dir`.
/// `listening` is told the bound address (port 0 picks one). Connections that do
/// not authenticate are turned away and the wait goes on.
pub fn receive(
    opts: &RecvOptions,
    listening: impl FnOnce(SocketAddr),
) -> Result<RecvSummary, TransferError> {
    // A directory in use is said before anything listens (and a weak token, by
    // `Server::bind`), and the directory stays held from here: a second receiver
    // started once this one listens is refused (taking the lock only when the
    // wait for a sender began left a moment in which it was not).
    let dir_lock = lock_dir(opts)?;
    let server = Server::bind(opts)?;
    listening(server.local_addr());
    server.serve_one_holding(opts, dir_lock)
}

/// The session of the authenticated sender `auth`, holding the directory with
/// `dir_lock`.
fn serve_session(
    auth: Authenticated,
    opts: &RecvOptions,
    dir_lock: Option<Arc<Flock<File>>>,
) -> Result<RecvSummary, TransferError> {
    let Authenticated {
        mut ctl,
        keys,
        peer,
    } = auth;
    let block_key = crate::secure::block_key(&opts.token);
    let (files, dirs, channels, block_size, transport) = match ctl.recv()? {
        Msg::Offer {
            files,
            dirs,
            channels,
            block_size,
            transport,
        } => (files, dirs, channels, block_size, transport),
        m => {
            return Err(TransferError::Protocol(format!(
                "expected an offer, got {m:?}"
            )))
        }
    };
    ctl.stream()
        .set_read_timeout(Some(opts.timeout.max(Duration::from_secs(600))))
        .map_err(TransferError::io("control channel"))?;
    let refuse = |ctl: &mut Control, e: TransferError| -> TransferError {
        let _ = ctl.send(&Msg::Reject {
            reason: e.to_string(),
        });
        e
    };
    let offer = Offer {
        files,
        dirs,
        channels,
        block_size,
        transport,
    };
    let Prepared {
        listeners,
        root,
        incoming,
        have,
        present_files,
        sink,
    } = match prepare(&mut ctl, opts, &offer, block_key) {
        Ok(p) => p,
        Err(e) => return Err(refuse(&mut ctl, e)),
    };
    let files = offer.files;
    let incoming = Arc::new(Mutex::new(incoming));
    let ports = listeners
        .iter()
        .map(Listener::port)
        .collect::<Result<Vec<_>, _>>()?;
    ctl.send(&Msg::Accept {
        ports,
        have,
        present: present_files,
        replace: opts.overwrite,
    })?;
    let (reader, writer) = ctl.split()?;
    let (events, rx) = mpsc::channel::<Event>();
    let turned_away = Arc::new(AtomicU64::new(0));

    for (c, l) in listeners.into_iter().enumerate() {
        let cfg = UdtConnConfig {
            socket_id: u32::from_be_bytes(crate::secure::random_bytes()).max(1),
            ..opts.udt
        };
        let (incoming, timeout, impair) = (incoming.clone(), opts.timeout, opts.impair);
        let (events, turned_away) = (events.clone(), turned_away.clone());
        let ticket = keys.ticket(c);
        let seal = Seal::new(&keys, c, Side::Receiver, transport, opts.encrypt);
        let sink = sink.clone();
        // A channel may still be writing after the session has returned (a failed
        // one stops waiting for it): it holds the directory too.
        let dir_lock = dir_lock.clone();
        thread::spawn(move || {
            let door = Door {
                cfg,
                timeout,
                impair,
                c,
                ticket,
                seal,
            };
            let r = accept_sender(l, door, &turned_away)
                .and_then(|s| serve_channel(s, &sink, &incoming, &events));
            drop(dir_lock);
            let _ = events.send(Event::ChannelEnded(r));
        });
    }
    // Blocks sent again come this way, and this thread writes them: the session
    // waits for it before it returns (and lets the directory go).
    let control = {
        let (incoming, events, sink) = (incoming.clone(), events.clone(), sink.clone());
        thread::spawn(move || serve_control(reader, &sink, &incoming, &events))
    };
    drop(events);
    // A receiver thread slow to get here (a loaded machine) finds blocks already
    // stored; the tests make it slow on purpose.
    if !opts.hooks.pause_before_data_phase.is_zero() {
        thread::sleep(opts.hooks.pause_before_data_phase); // a test's race window
    }
    let mut session = Session {
        root,
        incoming,
        writer,
        digests: vec![None; files.len()],
        done: vec![false; files.len()],
        batch: vec![],
        attempts: HashMap::new(),
        ok_files: 0,
        bytes: 0,
        failed_files: 0,
        refetched: 0,
        present: 0,
        replaced: 0,
        differ: vec![],
        told: (0, Clock::new(), 0),
    };
    let mut open_channels = usize::from(channels);
    let mut failure = session.run(
        &rx,
        &sink.stored,
        &mut open_channels,
        files.len(),
        block_size,
    );
    // Whatever verified stays verified: commit it even if the session is failing.
    if !session.batch.is_empty() {
        if let Err(e) = session.commit() {
            failure.get_or_insert(e);
        }
    }
    if let Some(e) = failure {
        // Tell the sender why, and close the control channel. The sender waits on
        // it for verdicts, and this end's control reader (a thread blocked reading
        // it) would otherwise hold it open: a sender left waiting with no timeout.
        let _ = session.writer.send(&Msg::Reject {
            reason: e.to_string(),
        });
        let _ = session.writer.shutdown();
        // Blocks already in this host's buffers are still written and journaled,
        // so that a new session need not send them again: wait for the channels
        // to end (the sender stops when it reads the above), or for a quiet spell.
        while open_channels > 0 {
            match rx.recv_timeout(DRAIN_QUIET) {
                Ok(Event::ChannelEnded(_)) => open_channels -= 1,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = control.join();
        // Part files and journals stay for a new session to resume from.
        return Err(e);
    }
    session.refetched = session
        .incoming
        .lock()
        .expect("no panics hold it")
        .iter()
        .map(|f| f.refetched)
        .sum();
    // The last count first: the sender's progress ends where the files do.
    let _ = session.writer.send(&Msg::Progress {
        bytes: sink.stored.load(Ordering::Relaxed),
    });
    let finished = session.writer.send(&Msg::Finished);
    // The sender reads nothing after it: end the control reader (a sender that
    // kept the connection open would keep it, and this directory, a while).
    let _ = session.writer.shutdown();
    let _ = control.join();
    finished?;
    if session.failed_files > 0 {
        return Err(TransferError::Integrity(format!(
            "{} of {} files failed their checks",
            session.failed_files,
            files.len()
        )));
    }
    if !session.differ.is_empty() {
        return Err(TransferError::Integrity(format!(
            "{} file(s) here have the size of the sender's but other contents, and were \
             left as they are: {} (`longhaul recv --overwrite` replaces them)",
            session.differ.len(),
            session.differ.join(", ")
        )));
    }
    Ok(RecvSummary {
        peer,
        files: session.ok_files,
        present: session.present,
        replaced: session.replaced,
        bytes: session.bytes,
        refetched: session.refetched,
        turned_away: turned_away.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::channels::read_exact_within;
    use super::incoming::{store, Arrival, Incoming, Place, Sink};
    use super::session::Event;
    use super::*;
    use crate::transfer::beneath::DirHandle;
    use crate::transfer::channel::DataChannel;
    use crate::transfer::{send, SendOptions, Transport};
    use longhaul_proto::transfer::BlockRepr;
    use std::collections::{BTreeMap, HashSet};
    use std::io::Write;

    /// A token strong enough to be taken.
    const TOKEN: &str = "unit-test-0123456789abcdef0123456789abcdef";

    /// A receiver that starts its data phase late, when every block has already
    /// arrived, commits each file once. (Before, a file whole before the data
    /// phase counted as whole from the start and again by its `Written` event: it
    /// was committed twice and the second rename failed with "No such file"; this
    /// test failed so in three runs of three.)
    #[test]
    fn a_receiver_that_starts_late_commits_each_file_once() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut paths = vec![];
        for (i, len) in [1usize, 10, 1000, 300_000, 2_000_000]
            .into_iter()
            .enumerate()
        {
            let p = src.path().join(format!("f{i}"));
            std::fs::write(&p, vec![i as u8; len]).unwrap();
            paths.push(p);
        }
        let t = Duration::from_secs(30);
        let mut opts = RecvOptions::new(dst.path().to_path_buf(), TOKEN);
        opts.hooks.pause_before_data_phase = Duration::from_millis(500);
        let (tx, rx) = mpsc::channel();
        let h = thread::spawn(move || receive(&opts, |a| tx.send(a).unwrap()));
        let sent = send(&SendOptions {
            channels: 1,
            block_size: 64 << 10,
            ..SendOptions::new(paths.clone(), rx.recv_timeout(t).unwrap(), TOKEN)
        });
        let got = h.join().unwrap();
        assert!(sent.is_ok() && got.is_ok(), "sent {sent:?}, got {got:?}");
        assert_eq!(got.unwrap().files, 5);
        for p in &paths {
            let name = p.file_name().unwrap();
            assert!(std::fs::read(p).unwrap() == std::fs::read(dst.path().join(name)).unwrap());
        }
    }

    /// A receiver that reads back files it holds says how far it got while the
    /// sender waits for its answer (`Checking`), and the sender waits on through
    /// those messages. Here it says so after every block; before `Checking`, a
    /// sender took such a message for a broken protocol.
    #[test]
    fn a_sender_waits_while_the_receiver_reads_back_what_it_holds() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let p = src.path().join("f");
        std::fs::write(&p, &data).unwrap();
        std::fs::write(dst.path().join("f"), &data).unwrap();
        let t = Duration::from_secs(30);
        let mut opts = RecvOptions::new(dst.path().to_path_buf(), TOKEN);
        opts.hooks.checking_every = Duration::ZERO;
        let (tx, rx) = mpsc::channel();
        let h = thread::spawn(move || receive(&opts, |a| tx.send(a).unwrap()));
        let sent = send(&SendOptions {
            channels: 1,
            block_size: 64 << 10,
            ..SendOptions::new(vec![p], rx.recv_timeout(t).unwrap(), TOKEN)
        });
        let got = h.join().unwrap();
        let (sent, got) = (sent.expect("send"), got.expect("receive"));
        assert_eq!((sent.present, sent.blocks, got.present), (1, 0, 1));
    }

    /// No block is stored into a file the receiver holds whole: the sender sends
    /// none, and one that comes anyway ends the session with nothing written.
    #[test]
    fn a_block_of_a_file_held_whole_is_refused() {
        let incoming = files(&[100]);
        incoming.lock().unwrap()[0].present = Some([0; 32]);
        let (events, _rx) = mpsc::channel();
        let e = put(&incoming, &events, 0, 0, 100).unwrap_err();
        assert!(e.to_string().contains("holds whole"), "{e}");
        assert!(incoming.lock().unwrap()[0].hashes.is_empty());
    }

    /// A data port that a port scanner connects to and leaves, and a stranger who
    /// connects and sends the wrong ticket, still takes the sender's connection
    /// after them, over TCP and UDT, in clear and encrypted. Before, the first
    /// connection without the ticket ended the session. Encrypted, a stranger
    /// (without the session's keys) cannot even open a UDT connection: its
    /// handshake never opens, so nothing is turned away there; over TCP its first
    /// record fails and it is turned away.
    #[test]
    fn connections_without_the_ticket_are_turned_away_and_the_sender_gets_in() {
        let keys = crate::secure::SessionKeys::from_split(&[1; 32], &[2; 32]);
        let stranger_keys = crate::secure::SessionKeys::from_split(&[3; 32], &[4; 32]);
        let ticket = keys.ticket(0);
        let t = Duration::from_secs(20);
        for encrypt in [false, true] {
            for transport in [Transport::Tcp, Transport::Udt] {
                let what = format!("{transport:?}, encrypted: {encrypt}");
                let l = Listener::bind(transport, "127.0.0.1:0".parse().unwrap()).unwrap();
                let addr = SocketAddr::from(([127, 0, 0, 1], l.port().unwrap()));
                let turned_away = Arc::new(AtomicU64::new(0));
                let counter = turned_away.clone();
                let cfg = UdtConnConfig::default();
                let door = Door {
                    cfg,
                    timeout: t,
                    impair: None,
                    c: 0,
                    ticket,
                    seal: Seal::new(&keys, 0, Side::Receiver, transport, encrypt),
                };
                let shown = what.clone();
                let h = thread::spawn(move || {
                    let mut s = accept_sender(l, door, &counter)?;
                    let mut after = [0u8; 5];
                    assert!(read_exact_within(&mut s, &mut after, t), "{shown}");
                    Ok::<_, TransferError>(after)
                });
                // In clear a stranger's UDT connect waits while the port is busy
                // with the one before; encrypted it can never connect, so give up soon.
                let wait = if encrypt { Duration::from_secs(1) } else { t };
                let stranger_connect = || {
                    let seal = Seal::new(&stranger_keys, 0, Side::Sender, transport, encrypt);
                    DataChannel::connect(transport, addr, cfg, wait, seal, None)
                };
                // A scanner: connects, says nothing, leaves.
                drop(stranger_connect());
                // A stranger: the wrong ticket, then a block's worth of bytes.
                if let Ok(mut stranger) = stranger_connect() {
                    let _ = stranger.write_all(&[0xaa; 32]);
                    let _ = stranger.write_all(&[0x55; 100]);
                    if transport == Transport::Udt {
                        // The receiver reads the wrong ticket and closes; stay until then.
                        let _ = stranger.linger(Duration::from_secs(1));
                    }
                }
                let seal = Seal::new(&keys, 0, Side::Sender, transport, encrypt);
                let mut sender = DataChannel::connect(transport, addr, cfg, t, seal, None).unwrap();
                sender.write_all(&ticket).unwrap();
                sender.write_all(b"hello").unwrap();
                let got = h.join().unwrap();
                assert_eq!(got.unwrap(), *b"hello", "{what}");
                let want = if encrypt && transport == Transport::Udt {
                    0
                } else {
                    2
                };
                assert_eq!(turned_away.load(Ordering::Relaxed), want, "{what}");
                let _ = sender.finish(Duration::from_secs(1));
            }
        }
    }

    /// A data port that nobody opens with the ticket before the timeout ends the
    /// channel with an error that says how many were turned away.
    #[test]
    fn running_out_of_time_after_turning_connections_away_says_so() {
        let keys = crate::secure::SessionKeys::from_split(&[1; 32], &[2; 32]);
        let l = Listener::bind(Transport::Tcp, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], l.port().unwrap()));
        let counter = Arc::new(AtomicU64::new(0));
        let c = counter.clone();
        let h = thread::spawn(move || {
            let door = Door {
                cfg: UdtConnConfig::default(),
                timeout: Duration::from_secs(2),
                impair: None,
                c: 3,
                ticket: keys.ticket(3),
                seal: Seal::Clear,
            };
            accept_sender(l, door, &c).map(|_| ())
        });
        let mut stranger = std::net::TcpStream::connect(addr).unwrap();
        stranger.write_all(&[1; 32]).unwrap();
        let e = h.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("data channel 3") && e.contains("1 that did not were closed unread"),
            "{e}"
        );
        assert_eq!(counter.load(Ordering::Relaxed), 1);
    }

    /// Files of `sizes` bytes received with nothing written (`discard`).
    fn files(sizes: &[u64]) -> Mutex<Vec<Incoming>> {
        Mutex::new(sizes.iter().map(|&s| Incoming::discarded(s)).collect())
    }

    /// Stores `len` bytes at `offset` of file `file`, with a good trailer.
    fn put(
        incoming: &Mutex<Vec<Incoming>>,
        events: &mpsc::Sender<Event>,
        file: u32,
        offset: u64,
        len: u32,
    ) -> Result<(), TransferError> {
        put_after(incoming, events, (file, offset, len), Duration::ZERO)
    }

    /// [`put`], pausing `pause` between claiming the block and writing it.
    fn put_after(
        incoming: &Mutex<Vec<Incoming>>,
        events: &mpsc::Sender<Event>,
        (file, offset, len): (u32, u64, u32),
        pause: Duration,
    ) -> Result<(), TransferError> {
        let data = vec![7u8; len as usize];
        let sink = Sink {
            block_size: 100,
            block_key: [9; 32],
            stored: AtomicU64::new(0),
            pause_before_write: pause,
            max_assemblies: 4,
        };
        let trailer = *blake3::keyed_hash(&sink.block_key, &data).as_bytes();
        let b = BlockRepr { file, offset, len };
        store(incoming, events, &sink, b, &data, &trailer, Arrival::Sent)
    }

    #[test]
    fn only_the_files_own_blocks_are_stored_and_each_file_is_written_once() {
        let incoming = files(&[250, 1]);
        let (events, rx) = mpsc::channel();
        // Not blocks of a 250-byte file in 100-byte blocks: empty, misaligned,
        // overlapping the next, past the end, a short middle, a long last; and a
        // file that was not offered.
        for (file, offset, len) in [
            (0, 0, 0),
            (0, 50, 100),
            (0, 0, 150),
            (0, 300, 100),
            (0, 100, 99),
            (0, 200, 100),
            (1, 1, 0),
            (1, 0, 2),
            (2, 0, 1),
        ] {
            let e = put(&incoming, &events, file, offset, len).unwrap_err();
            assert!(
                e.to_string()
                    .contains("not one of the offered files' blocks"),
                "{file}@{offset}+{len}: {e}"
            );
        }
        for (file, offset, len) in [(0, 200, 50), (0, 0, 100), (1, 0, 1), (0, 100, 100)] {
            put(&incoming, &events, file, offset, len).unwrap();
        }
        let e = put(&incoming, &events, 0, 100, 100).unwrap_err();
        assert!(e.to_string().contains("arrived twice"), "{e}");
        drop(events);
        let written: Vec<usize> = rx
            .iter()
            .map(|ev| match ev {
                Event::Written(f) => f,
                _ => panic!("only Written events"),
            })
            .collect();
        assert_eq!(written, [1, 0], "each file is announced once, when whole");
    }

    /// A channel writing a block does not hold up the others: while one block's
    /// write is held back, another block of the same file is stored, and the file
    /// is whole once both are in. (With the write under the session's lock, the
    /// second block waited for the first and this test failed.)
    #[test]
    fn a_block_being_written_does_not_hold_up_the_other_channels() {
        let dir = tempfile::tempdir().unwrap();
        let place = Place::new(DirHandle::open_root(dir.path()).unwrap(), "f");
        let part = dir.path().join(&place.part);
        let journal_path = dir.path().join(&place.journal);
        std::fs::write(&part, [0u8; 200]).unwrap();
        std::fs::write(&journal_path, "longhaul-journal 1 200 100\n").unwrap();
        let incoming = Arc::new(Mutex::new(vec![Incoming {
            place: Some(place),
            shown: "f".into(),
            journaled: true,
            mode: 0o644,
            open: None,
            size: 200,
            received: 0,
            hashes: BTreeMap::new(),
            kept: HashSet::new(),
            assembling: BTreeMap::new(),
            refetched: 0,
            discard: false,
            mtime: None,
            present: None,
            replace: false,
            replacing: false,
        }]));
        let (events, rx) = mpsc::channel();
        let slow = {
            let (incoming, events) = (Arc::clone(&incoming), events.clone());
            thread::spawn(move || {
                put_after(&incoming, &events, (0, 0, 100), Duration::from_secs(3))
            })
        };
        // Give the slow channel time to claim its block, then store the other.
        thread::sleep(Duration::from_millis(300));
        put(&incoming, &events, 0, 100, 100).unwrap();
        assert!(
            !slow.is_finished(),
            "the second block waited for the first one's write"
        );
        assert!(
            rx.try_recv().is_err(),
            "not whole before the first block is in"
        );
        slow.join().unwrap().unwrap();
        assert!(matches!(rx.try_recv(), Ok(Event::Written(0))));
        assert_eq!(std::fs::read(&part).unwrap(), [7u8; 200]);
        let journal = std::fs::read_to_string(&journal_path).unwrap();
        assert_eq!(journal.lines().count(), 3, "{journal}");
        assert!(
            incoming.lock().unwrap()[0].open.is_none(),
            "closed once whole"
        );
    }
}
