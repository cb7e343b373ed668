//! The receiving side: [`listen`] admits senders (handshakes, bounded work before
//! authentication); this module serves a session's offer, channels and commits.

mod listen;

use listen::Authenticated;
pub use listen::{Log, Server, MAX_PENDING, MAX_PER_SOURCE, PRE_AUTH_DEADLINE};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::transfer::{BlockRepr, HEADER_LEN};
use longhaul_proto::udt::UdtConnConfig;
use longhaul_wire::block::BlockPacket;

use super::beneath::{DirHandle, Entry};
use super::channel::{DataChannel, Listener, Seal, Transport};
use super::control::{hex, unhex, Control, ControlReader, ControlWriter, Msg, Side};
use super::{
    journal_name, name_clash, new_journal_name, part_name, safe_join, safe_join_dir, NameClash,
    TransferError, END_OF_CHANNEL,
};
use crate::clock::Clock;
use crate::Impairment;
use nix::fcntl::{Flock, FlockArg};
use rustix::fs::OFlags;

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

/// Where a received file goes: its folder, held open ([`DirHandle`]), and its
/// names there. Every operation on the file goes through the handle.
#[derive(Debug, Clone)]
struct Place {
    dir: Arc<DirHandle>,
    name: String,
    /// The part file's name ([`super::WORKING_SUFFIXES`]).
    part: String,
    /// The journal's name: blocks written and checked, one line each, so that a
    /// new session can resume.
    journal: String,
}

impl Place {
    fn new(dir: Arc<DirHandle>, name: &str) -> Self {
        Place {
            part: part_name(name),
            journal: journal_name(name),
            name: name.to_string(),
            dir,
        }
    }

    fn io(&self, name: &str) -> impl FnOnce(std::io::Error) -> TransferError {
        TransferError::io(self.dir.shown(name).display().to_string())
    }
}

/// One file being received.
struct Incoming {
    /// Where it goes; `None` when nothing is written ([`RecvOptions::discard`]).
    place: Option<Place>,
    /// Its name, as shown to the user.
    shown: String,
    /// Whether the file has a journal: only files of more than one block. A file of
    /// one block is all or nothing, so a journal would save nothing and cost two
    /// file creations and a deletion per small file.
    journaled: bool,
    /// The part file and the journal, open only while blocks of the file arrive
    /// (closed once it is complete, so many small files do not exhaust descriptors).
    /// The part file is shared: channels write their blocks of it at the same time,
    /// each without the session's lock (see [`store`]).
    open: Option<(Arc<File>, Option<File>)>,
    size: u64,
    received: u64,
    /// Block hashes by offset.
    hashes: BTreeMap<u64, [u8; 32]>,
    /// Offsets of blocks kept from an interrupted session (in `hashes`) that the
    /// sender may still replace: its copy differs (the file changed since). While a
    /// replacement is being written the file is not whole, so it is not checked.
    kept: HashSet<u64>,
    /// Blocks that arrived damaged and were stored when sent again.
    refetched: u64,
    /// Checked and dropped, not written ([`RecvOptions::discard`]).
    discard: bool,
    /// Permission bits the file gets when it is put in place ([`final_mode`]).
    mode: u32,
    /// The sender's modification time, which the file gets when it is put in
    /// place: seconds and nanoseconds since the Unix epoch.
    mtime: Option<(i64, u32)>,
    /// Here whole already, of the size offered (`Accept.present`): its digest,
    /// read back from the file itself. None of its blocks may arrive; the
    /// sender's digest alone decides: the same file, or another that is left as
    /// it is, or replaced whole ([`Incoming::start_replacing`]).
    present: Option<[u8; 32]>,
    /// Whether a file held whole may be replaced (`recv --overwrite`).
    replace: bool,
    /// Put in place over a file here (`--overwrite`): one of another size, or
    /// one held whole whose blocks come after all.
    replacing: bool,
}

/// Permission bits of a part file: its owner's only, whatever the file's own will
/// be, so a partial copy of a private file is never readable by others, and the
/// receiver can always write it.
const PART_MODE: u32 = 0o600;

/// The permission bits a received file gets: the sender's (or, if it gave none,
/// a new file's `0o666`) less this process's umask, as `cp` and `scp` give a new
/// file, without setuid, setgid or sticky bits.
fn final_mode(offered: Option<u32>) -> u32 {
    offered.unwrap_or(0o666) & 0o777 & !umask()
}

/// This process's umask, read from `/proc/self/status` (`umask(2)` can only read
/// it by setting it, which races with other threads); `0o022` if unreadable.
fn umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("Umask:"))?;
                u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
            })
            .unwrap_or(0o022)
    })
}

impl Incoming {
    /// A file held whole that differs at the sender, which sends it whole to
    /// replace it (`recv --overwrite`): from now on it is received like any file,
    /// into its part file, and put in place over the one here. Called by its
    /// first block or its digest, whichever comes first (they travel on different
    /// connections). False if it may not be replaced.
    fn start_replacing(&mut self) -> bool {
        if self.present.is_none() {
            return true;
        }
        if !self.replace {
            return false;
        }
        self.present = None;
        self.replacing = true;
        self.received = 0;
        true
    }

    /// The part file, for a block to be written into it: opened (with the journal)
    /// by the first block that finds it closed, and kept open until the file is
    /// whole.
    fn part_file(&mut self) -> Result<Arc<File>, TransferError> {
        if let Some((file, _)) = &self.open {
            return Ok(Arc::clone(file));
        }
        let p = self
            .place
            .as_ref()
            .expect("only written files have part files");
        // A journaled part file was made at the offer; a one-block file's part is
        // made by its block.
        let file = if self.journaled {
            p.dir.open(&p.part, OFlags::WRONLY, 0)
        } else {
            p.dir.create_fresh(&p.part, PART_MODE)
        }
        .map_err(p.io(&p.part))?;
        let journal = if self.journaled {
            Some(
                p.dir
                    .open(&p.journal, OFlags::WRONLY | OFlags::APPEND, 0)
                    .map_err(p.io(&p.journal))?,
            )
        } else {
            None
        };
        let file = Arc::new(file);
        self.open = Some((Arc::clone(&file), journal));
        Ok(file)
    }

    /// `len` bytes at `offset`, with hash `hash`, are in the part file (or, when
    /// discarding, were checked): journals the block and counts it. The file is
    /// closed once whole.
    fn note_written(&mut self, offset: u64, len: u64, hash: &[u8]) -> Result<(), TransferError> {
        if let Some((_, Some(journal))) = &mut self.open {
            // One write per line: a crash leaves whole lines (and at worst a torn
            // last one, which a resume ignores). The data was written first; a
            // resume re-reads and re-hashes every journaled block anyway, so a
            // power cut that kept the line but not the data costs a re-send, not
            // a wrong file, and no fsync is needed per block.
            let p = self.place.as_ref().expect("a journal is in a place");
            journal
                .write_all(journal_line(offset, hash).as_bytes())
                .map_err(p.io(&p.journal))?;
        }
        self.received += len;
        if self.received == self.size {
            self.open = None;
        }
        Ok(())
    }
}

/// The blocks a journal records for a file of `size` bytes in `block_size` blocks,
/// or `None` if there is none or it belongs to another file or block size. A
/// torn last line (a crash while writing it) is ignored.
fn read_journal(p: &Place, size: u64, block_size: u32) -> Option<BTreeMap<u64, [u8; 32]>> {
    let mut text = String::new();
    // A journal that is not a file (a planted link) is no journal.
    p.dir
        .open_read(&p.journal)
        .ok()?
        .take(64 << 20)
        .read_to_string(&mut text)
        .ok()?;
    let mut lines = text.lines();
    if lines.next()? != format!("longhaul-journal 1 {size} {block_size}") {
        return None;
    }
    let mut out = BTreeMap::new();
    for l in lines {
        let Some((o, h)) = l.split_once(' ') else {
            break;
        };
        let (Ok(o), Some(h)) = (
            o.parse::<u64>(),
            unhex(h).and_then(|h| <[u8; 32]>::try_from(h).ok()),
        ) else {
            break;
        };
        if o >= size || o % u64::from(block_size) != 0 {
            return None;
        }
        out.insert(o, h);
    }
    Some(out)
}

/// A journal's line for the checked block at `offset` (what [`read_journal`] reads).
fn journal_line(offset: u64, hash: &[u8]) -> String {
    format!("{offset} {}\n", hex(hash))
}

/// The journaled blocks of a part file that still match their hashes: each is read
/// back and hashed, so a resume never trusts bytes a crash (or a power cut before
/// the page cache reached the disk) may have lost. Costs one read of what is kept.
fn verify_kept(
    file: &File,
    part: &std::path::Path,
    kept: BTreeMap<u64, [u8; 32]>,
    size: u64,
    sink: &Sink,
    read_back: &mut ReadBack,
) -> Result<BTreeMap<u64, [u8; 32]>, TransferError> {
    let mut good = BTreeMap::new();
    let offsets = kept.keys().copied().collect::<Vec<_>>();
    let mut told = |n| read_back.add(n);
    hash_blocks(file, part, &offsets, size, sink, &mut told, |o, h| {
        if kept[&o] == h {
            good.insert(o, h);
        }
    })?;
    Ok(good)
}

/// The digest of a file here whole already ([`Incoming::present`]), computed as
/// the sender computes its own: BLAKE3 over its blocks' hashes in order.
fn digest_present(
    p: &Place,
    size: u64,
    sink: &Sink,
    read: &AtomicU64,
) -> Result<[u8; 32], TransferError> {
    let block_size = sink.block_size;
    let path = p.dir.shown(&p.name);
    let file = p.dir.open_read(&p.name).map_err(p.io(&p.name))?;
    let offsets: Vec<u64> = (0..size).step_by(block_size as usize).collect();
    let mut d = blake3::Hasher::new();
    let mut count = |n| {
        read.fetch_add(n, Ordering::Relaxed);
        Ok(())
    };
    hash_blocks(&file, &path, &offsets, size, sink, &mut count, |_, h| {
        d.update(&h);
    })?;
    Ok(*d.finalize().as_bytes())
}

/// The digests of the files held whole ([`digest_present`]), each a path and a
/// size, read back by several threads at once: a tree sent again is read back
/// whole before the answer, and reads in flight together go faster from a disk
/// that queues them (and a file system that reads ahead per file), and spread the
/// hashing over the cores. `read_back` hears of the bytes read as they go.
fn digest_all_present(
    files: &[(&Place, u64)],
    sink: &Sink,
    read_back: &mut ReadBack,
) -> Result<Vec<[u8; 32]>, TransferError> {
    let block_size = sink.block_size;
    // Each reader holds a block: their buffers stay within READ_BACK_MEMORY, as
    // long as one block is (the session's cap counts a block per channel).
    let threads = (READ_BACK_MEMORY / u64::from(block_size).max(1))
        .clamp(1, READ_BACK_THREADS as u64) as usize;
    let threads = threads.min(files.len());
    let next = AtomicUsize::new(0);
    let read = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let mut digests = vec![None; files.len()];
    let (done, results) = mpsc::channel();
    let told: Result<(), TransferError> = thread::scope(|s| {
        for _ in 0..threads {
            let done = done.clone();
            let (next, read, failed) = (&next, &read, &failed);
            s.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= files.len() || failed.load(Ordering::Relaxed) {
                    return;
                }
                let (place, size) = files[k];
                let r = digest_present(place, size, sink, read);
                failed.fetch_or(r.is_err(), Ordering::Relaxed);
                if done.send((k, r)).is_err() {
                    return;
                }
            });
        }
        drop(done);
        // This thread tells the sender how far the others got, about once a
        // [`CHECKING_EVERY`], until every file is read or one fails.
        let mut counted = 0;
        let told = loop {
            let got = results.recv_timeout(Duration::from_millis(100));
            let now = read.load(Ordering::Relaxed);
            if let Err(e) = read_back.add(now - counted) {
                break Err(e);
            }
            counted = now;
            match got {
                Ok((k, Ok(d))) => digests[k] = Some(d),
                Ok((_, Err(e))) => break Err(e),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(()),
            }
        };
        // A failure here or there stops the readers at their next file (the
        // scope joins them).
        failed.store(true, Ordering::Relaxed);
        told
    });
    told?;
    Ok(digests
        .into_iter()
        .map(|d| d.expect("every file read back"))
        .collect())
}

/// Threads that read back the files held whole: more than the cores, since they
/// mostly wait for the disk, whose queue they keep full.
const READ_BACK_THREADS: usize = 8;
/// The most the readers' block buffers may take together: 8 readers of 4 MiB
/// blocks (the default), 1 of 64 MiB blocks or more.
const READ_BACK_MEMORY: u64 = 64 << 20;

/// Reads the blocks of `file` (`shown` in errors) at `offsets` and hands each one's
/// BLAKE3 hash to `each`, and the bytes read to `count`.
fn hash_blocks(
    file: &File,
    shown: &std::path::Path,
    offsets: &[u64],
    size: u64,
    sink: &Sink,
    count: &mut dyn FnMut(u64) -> Result<(), TransferError>,
    mut each: impl FnMut(u64, [u8; 32]),
) -> Result<(), TransferError> {
    let block_size = sink.block_size;
    let mut buf = vec![0u8; (block_size as u64).min(size) as usize];
    for &o in offsets {
        let n = (size - o).min(u64::from(block_size)) as usize;
        file.read_exact_at(&mut buf[..n], o)
            .map_err(TransferError::io(shown.display().to_string()))?;
        each(
            o,
            *blake3::keyed_hash(&sink.block_key, &buf[..n]).as_bytes(),
        );
        count(n as u64)?;
    }
    Ok(())
}

/// How often the receiver tells a waiting sender how far it has read back.
const CHECKING_EVERY: Duration = Duration::from_secs(1);

/// What the receiver reads back before it answers an offer, told to the sender
/// about every [`CHECKING_EVERY`] (`Msg::Checking`): a sender waiting for `Accept`
/// while terabytes are read would otherwise take the silence for a dead peer.
struct ReadBack<'a> {
    ctl: &'a mut Control,
    total: u64,
    done: u64,
    clock: Clock,
    /// When the last message went, ns on `clock`.
    told: u64,
}

impl<'a> ReadBack<'a> {
    fn new(ctl: &'a mut Control, total: u64) -> Self {
        ReadBack {
            ctl,
            total,
            done: 0,
            clock: Clock::new(),
            told: 0,
        }
    }

    /// `n` more bytes read back.
    fn add(&mut self, n: u64) -> Result<(), TransferError> {
        self.done += n;
        let now = self.clock.now().as_nanos();
        #[cfg(not(test))]
        let every = CHECKING_EVERY;
        #[cfg(test)]
        let every = tests::CHECKING_EVERY.get();
        if now - self.told >= every.as_nanos() as u64 {
            self.told = now;
            self.ctl.send(&Msg::Checking {
                bytes: self.done,
                total: self.total,
            })?;
        }
        Ok(())
    }
}

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

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the stream ended before the
/// first byte.
fn read_exact(s: &mut DataChannel, buf: &mut [u8]) -> Result<bool, TransferError> {
    let mut got = 0;
    while got < buf.len() {
        let n = s.read(&mut buf[got..])?;
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(TransferError::Protocol(
                "a data channel ended inside a block".into(),
            ));
        }
        got += n;
    }
    Ok(true)
}

/// Serves one session: authenticates a sender, takes its files into `opts.dir`.
/// `listening` is told the bound address (port 0 picks one). Connections that do
/// not authenticate are turned away and the wait goes on.
pub fn receive(
    opts: &RecvOptions,
    listening: impl FnOnce(SocketAddr),
) -> Result<RecvSummary, TransferError> {
    // A weak token and a directory in use are said before anything listens.
    crate::secure::check_token(&opts.token).map_err(TransferError::WeakToken)?;
    drop(lock_dir(opts)?);
    let server = Server::bind(opts)?;
    listening(server.local_addr());
    server.serve_one(opts)
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
    if !(1..=MAX_CHANNELS).contains(&channels) || !(1..=MAX_BLOCK).contains(&block_size) {
        let e = TransferError::Protocol(format!(
            "asked for {channels} channels and {block_size}-byte blocks; at most {MAX_CHANNELS} and {MAX_BLOCK}"
        ));
        return Err(refuse(&mut ctl, e));
    }
    let need = super::session_memory(channels, block_size, transport, &opts.udt);
    if need > opts.memory_cap {
        let e = TransferError::Protocol(format!(
            "{channels} channels of {block_size}-byte blocks would need {} MiB of buffers here; at most {} MiB (fewer channels or smaller blocks)",
            need >> 20,
            opts.memory_cap >> 20
        ));
        return Err(refuse(&mut ctl, e));
    }
    let listeners = match bind_data_ports(opts, transport, channels) {
        Ok(l) => l,
        Err(e) => return Err(refuse(&mut ctl, e)),
    };
    // Check every name before anything is written: against each other, then each
    // against what the receiver holds.
    let file_names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let dir_names: Vec<&str> = dirs.iter().map(|d| d.path.as_str()).collect();
    if let Some(clash) = name_clash(&file_names, &dir_names) {
        let why = match clash {
            NameClash::Twice(n) => format!("`{n}` is offered twice"),
            NameClash::FileAndFolder(n) => format!("`{n}` is offered as a file and as a folder"),
            NameClash::InsideFile { name, file } => {
                format!("`{name}` is offered inside `{file}`, which is also offered as a file")
            }
        };
        return Err(refuse(&mut ctl, TransferError::Protocol(why)));
    }
    // Every name is checked for its form and against what is here (`safe_join`:
    // clear messages); what is then opened and written is reached through
    // directory handles that never follow a link ([`DirHandle`]), so what is here
    // changing after the check cannot redirect a write outside `opts.dir`.
    let root = if opts.discard {
        None
    } else {
        match DirHandle::open_root(&opts.dir) {
            Ok(r) => Some(r),
            Err(e) => {
                let e = TransferError::io(opts.dir.display().to_string())(e);
                return Err(refuse(&mut ctl, e));
            }
        }
    };
    let mut targets = vec![];
    for f in &files {
        if let Err(e) = safe_join(&opts.dir, &f.path) {
            return Err(refuse(&mut ctl, e));
        }
        targets.push(f);
    }
    for d in &dirs {
        if let Err(e) = safe_join_dir(&opts.dir, &d.path) {
            return Err(refuse(&mut ctl, e));
        }
    }
    // Room for everything, before anything is written (files held whole already,
    // of the size offered, need none: an upper bound is enough here).
    let need: u64 = if opts.discard {
        0
    } else {
        targets.iter().map(|f| f.size).fold(0, u64::saturating_add)
    };
    let free = fs4::available_space(&opts.dir).map_err(TransferError::io(format!(
        "{}: free space",
        opts.dir.display()
    )))?;
    let prepared = (|| -> Result<_, TransferError> {
        let Some(root) = &root else {
            // Nothing is written: every file is received, none held.
            let plain = targets.iter().map(|f| (None, *f, false, false));
            return Ok((plain.collect::<Vec<_>>(), vec![None; targets.len()]));
        };
        // The folders offered, parents first (the offer lists them so), each with
        // its mode less the umask, as `mkdir` does; the owner keeps rwx to put the
        // files in. A folder that exists is kept as it is.
        for d in &dirs {
            let mode = (d.mode.unwrap_or(0o777) & 0o777) | 0o700;
            let parts: Vec<&str> = d.path.split('/').collect();
            root.descend(&parts, Some(mode))
                .map_err(TransferError::io(d.path.clone()))?;
        }
        // Files of a folder come together: open each folder once.
        let mut folder: Option<(&str, Arc<DirHandle>)> = None;
        let mut out = vec![];
        for f in &targets {
            let (parent, name) = f.path.rsplit_once('/').unwrap_or(("", &f.path));
            let dir = match &folder {
                Some((p, d)) if *p == parent => d.clone(),
                _ => {
                    let parts: Vec<&str> = parent.split('/').filter(|c| !c.is_empty()).collect();
                    let d = root
                        .descend(&parts, Some(0o777))
                        .map_err(TransferError::io(f.path.clone()))?;
                    folder = Some((parent, d.clone()));
                    d
                }
            };
            let place = Place::new(dir, name);
            // A file of the size offered may be this very file, from an earlier
            // session: it is read back and hashed, and the sender sends none of it
            // (a re-run after an interruption sends only what is missing), or all
            // of it if it differs and replacing was asked for. Anything else in
            // the way is refused, unless replacing was asked for.
            let (present, existed) = match place.dir.entry(name).map_err(place.io(name))? {
                None => (false, false),
                Some(Entry::File(len)) if len == f.size => (true, false),
                Some(Entry::File(_) | Entry::Other) if opts.overwrite => (false, true),
                Some(found) => {
                    let what = match found {
                        Entry::File(len) => format!("with {len} bytes, not the {} offered", f.size),
                        Entry::Dir => "and is a folder".into(),
                        Entry::Other => "and is not a file".into(),
                    };
                    // Read on both ends: the sender relays it, and `send` has no
                    // such flag.
                    return Err(TransferError::Protocol(format!(
                        "`{}` exists on the receiver {what} (it replaces files only when \
                         started as `longhaul recv --overwrite`)",
                        f.path.escape_debug()
                    )));
                }
            };
            out.push((Some(place), *f, present, existed));
        }
        // What is read back before the answer: the files here already, whole, and
        // the blocks journals say interrupted sessions kept (of the same file and
        // block size, in a part file that is still there).
        let plans = out
            .iter()
            .map(|(place, f, present, _)| {
                let place = place.as_ref().expect("written files have places");
                let journaled = f.size > u64::from(block_size);
                (!present && journaled)
                    .then(|| read_journal(place, f.size, block_size))
                    .flatten()
                    .filter(|_| matches!(place.dir.entry(&place.part), Ok(Some(Entry::File(_)))))
            })
            .collect();
        Ok((out, plans))
    })();
    let (targets, plans) = match prepared {
        Ok(t) => t,
        Err(e) => return Err(refuse(&mut ctl, e)),
    };
    let need = need.saturating_sub(
        targets
            .iter()
            .filter(|t| t.2)
            .map(|t| t.1.size)
            .fold(0, u64::saturating_add),
    );
    if need > free {
        let e = TransferError::Protocol(format!(
            "the files need {need} bytes and {} has {free} free",
            opts.dir.display()
        ));
        return Err(refuse(&mut ctl, e));
    }
    let plans: Vec<Option<BTreeMap<u64, [u8; 32]>>> = plans;
    let total = targets
        .iter()
        .zip(&plans)
        .map(|((_, f, present, _), kept)| match kept {
            _ if *present => f.size,
            Some(k) => k
                .keys()
                .map(|o| (f.size - o).min(u64::from(block_size)))
                .sum(),
            None => 0,
        })
        .sum();
    // Reading back may fail (a file unreadable here): the sender is told why.
    let sink = Arc::new(Sink {
        block_size,
        block_key,
        stored: AtomicU64::new(0),
    });
    let prepared = (|| -> Result<_, TransferError> {
        let mut read_back = ReadBack::new(&mut ctl, total);
        // The files held whole first, several at a time.
        let held: Vec<(&Place, u64)> = targets
            .iter()
            .filter(|t| t.2)
            .map(|t| (t.0.as_ref().expect("held files have places"), t.1.size))
            .collect();
        let mut held_digests = digest_all_present(&held, &sink, &mut read_back)?.into_iter();
        let mut incoming = vec![];
        let mut have = vec![];
        let mut present_files = vec![];
        for (i, ((place, f, present, existed), kept)) in targets.into_iter().zip(plans).enumerate()
        {
            let (size, mode, mtime) = (f.size, f.mode, f.mtime);
            let shown = f.path.escape_debug().to_string();
            if present {
                let digest = held_digests.next().expect("one per file held whole");
                have.push(vec![]);
                present_files.push((i as u32, hex(&digest)));
                incoming.push(Incoming {
                    place,
                    shown,
                    journaled: false,
                    open: None,
                    size,
                    mode: final_mode(mode),
                    mtime,
                    received: size,
                    kept: HashSet::new(),
                    hashes: BTreeMap::new(),
                    refetched: 0,
                    discard: false,
                    present: Some(digest),
                    replace: opts.overwrite,
                    replacing: false,
                });
                continue;
            }
            let journaled = size > u64::from(block_size) && place.is_some();
            let mut hashes = BTreeMap::new();
            if let (true, Some(p)) = (journaled, &place) {
                // Made (or kept) here and closed again: blocks reopen it as they come.
                let file = match kept {
                    Some(_) => p.dir.open(&p.part, OFlags::RDWR, 0),
                    None => p.dir.create_fresh(&p.part, PART_MODE),
                }
                .map_err(p.io(&p.part))?;
                file.set_len(size).map_err(p.io(&p.part))?;
                hashes = match kept {
                    Some(k) => {
                        let shown = p.dir.shown(&p.part);
                        verify_kept(&file, &shown, k, size, &sink, &mut read_back)?
                    }
                    None => BTreeMap::new(),
                };
                drop(file);
                // The journal starts again with what checked out: no torn line or
                // block that failed its check stays in it.
                let mut text = format!("longhaul-journal 1 {size} {block_size}\n");
                for (o, h) in &hashes {
                    text.push_str(&journal_line(*o, h));
                }
                let fresh = new_journal_name(&p.name);
                p.dir
                    .create_fresh(&fresh, PART_MODE)
                    .and_then(|mut j| j.write_all(text.as_bytes()))
                    .and_then(|()| p.dir.rename(&fresh, &p.journal))
                    .map_err(p.io(&p.journal))?;
            }
            have.push(hashes.iter().map(|(&o, h)| (o, hex(h))).collect::<Vec<_>>());
            let received = hashes
                .keys()
                .map(|&o| (size - o).min(u64::from(block_size)))
                .sum();
            incoming.push(Incoming {
                place,
                shown,
                journaled,
                open: None,
                size,
                mode: final_mode(mode),
                mtime,
                received,
                kept: hashes.keys().copied().collect(),
                hashes,
                refetched: 0,
                discard: opts.discard,
                present: None,
                replace: false,
                replacing: existed,
            });
        }
        Ok((incoming, have, present_files))
    })();
    let (incoming, have, present_files) = match prepared {
        Ok(p) => p,
        Err(e) => return Err(refuse(&mut ctl, e)),
    };
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
    #[cfg(test)]
    thread::sleep(tests::PAUSE_BEFORE_DATA_PHASE.get());
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
    let mut undone = files.len();
    let mut failure: Option<TransferError> = None;
    // The data phase: blocks land on the channel threads; this loop verifies each
    // file once all its blocks and its digest are in, and commits verified files in
    // batches (one syncfs, then renames and confirmations).
    // An error that ends the loop below at once (a failed commit or check) joins
    // the others in `failure`, so that every failure reaches the sender.
    let mut data_phase = || -> Result<(), TransferError> {
        while failure.is_none() && (undone > 0 || open_channels > 0) {
            let ev = if session.batch.is_empty() {
                // No deadline here: a file of a terabyte says nothing until its last
                // block. A dead sender ends the channels (its closed port refuses
                // UDT's datagrams; TCP resets) and the control channel, and that comes
                // as an event.
                match rx.recv_timeout(PROGRESS_EVERY) {
                    Ok(ev) => ev,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        session.progress(&sink.stored);
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        failure = Some(TransferError::Protocol(
                            "every channel ended with files unfinished".into(),
                        ));
                        break;
                    }
                }
            } else {
                match rx.try_recv() {
                    Ok(ev) if session.batch.len() < COMMIT_BATCH => ev,
                    Ok(ev) => {
                        undone -= session.commit()?;
                        ev
                    }
                    Err(_) => {
                        undone -= session.commit()?;
                        continue;
                    }
                }
            };
            session.progress(&sink.stored);
            match ev {
                Event::Ctl(Ok(Msg::Digest {
                    file,
                    digest,
                    changed,
                    replaced,
                })) => {
                    let d = unhex(&digest).and_then(|d| <[u8; 32]>::try_from(d).ok());
                    match (session.digests.get_mut(file as usize), d) {
                        (Some(slot @ None), Some(d)) => *slot = Some(d),
                        _ => {
                            failure = Some(TransferError::Protocol(format!(
                                "a bad digest for file {file}"
                            )));
                            continue;
                        }
                    }
                    let file = file as usize;
                    if replaced && !session.start_replacing(file) {
                        failure = Some(TransferError::Protocol(format!(
                            "file {file} sent to replace one here, without `--overwrite`"
                        )));
                        continue;
                    }
                    if session.is_present(file) {
                        undone -= session.check_present(file);
                        continue;
                    }
                    // Kept blocks the sender sends again, whose new copies are not
                    // here yet: the file waits for them (their `Written`).
                    session.forget_kept(file, &changed, block_size);
                    // Files already whole from an interrupted session, and empty
                    // ones, wait only for this.
                    if session.is_whole(file) {
                        undone -= session.check(file)?;
                    }
                }
                Event::Ctl(Ok(m)) => {
                    failure = Some(TransferError::Protocol(format!("unexpected {m:?}")));
                }
                Event::Ctl(Err(e)) => failure = Some(e),
                Event::Written(file) => {
                    // Whole when it was sent, but maybe not now: the digest may
                    // since have said a kept block is coming again (its new copy
                    // sends `Written` once more).
                    if session.digests[file].is_some() && session.is_whole(file) {
                        undone -= session.check(file)?;
                    }
                }
                Event::Corrupt(file, offset, len) => {
                    let n = session.attempts.entry((file, offset)).or_insert(0);
                    *n += 1;
                    if *n > MAX_REFETCH {
                        failure = Some(TransferError::Integrity(format!(
                            "block {file}@{offset} arrived damaged {MAX_REFETCH} times"
                        )));
                    } else if let Err(e) = session.writer.send(&Msg::Resend {
                        blocks: vec![(file, offset, len)],
                    }) {
                        failure = Some(e);
                    }
                }
                Event::ChannelEnded(r) => {
                    open_channels -= 1;
                    if let Err(e) = r {
                        failure = Some(e);
                    }
                }
            }
        }
        Ok(())
    };
    if let Err(e) = data_phase() {
        failure.get_or_insert(e);
    }
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

/// Seconds and nanoseconds since the Unix epoch (before it, for negative seconds)
/// as a time; `None` if out of range.
fn system_time((secs, nanos): (i64, u32)) -> Option<std::time::SystemTime> {
    if nanos >= 1_000_000_000 {
        return None;
    }
    let epoch = std::time::UNIX_EPOCH;
    let t = if secs >= 0 {
        epoch.checked_add(Duration::from_secs(secs as u64))?
    } else {
        epoch.checked_sub(Duration::from_secs(secs.unsigned_abs()))?
    };
    t.checked_add(Duration::from_nanos(u64::from(nanos)))
}

/// How often the receiver says how much it has stored.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// Verified files committed together: one `syncfs`, then their renames.
const COMMIT_BATCH: usize = 4096;
/// Times a damaged block is fetched again before the session gives up.
const MAX_REFETCH: u32 = 3;
/// After a failure, how long the channels may go without news before the
/// receiver stops waiting for them.
const DRAIN_QUIET: Duration = Duration::from_secs(3);

/// What the channel and control threads tell the session.
enum Event {
    /// A control message (a digest), or the control channel's end.
    Ctl(Result<Msg, TransferError>),
    /// Every block of a file is written and checked.
    Written(usize),
    /// A block failed its hash: (file, offset, length).
    Corrupt(u32, u64, u32),
    /// A data channel ended (its last block is in), or failed.
    ChannelEnded(Result<(), TransferError>),
}

/// The receiver's side of the data phase.
struct Session {
    /// The destination, held open; `None` when nothing is written.
    root: Option<Arc<DirHandle>>,
    incoming: Arc<Mutex<Vec<Incoming>>>,
    writer: ControlWriter,
    digests: Vec<Option<[u8; 32]>>,
    /// Checked: failed, or verified (in the batch, or committed).
    done: Vec<bool>,
    /// Verified files waiting to be committed.
    batch: Vec<usize>,
    attempts: HashMap<(u32, u64), u32>,
    ok_files: usize,
    bytes: u64,
    failed_files: usize,
    refetched: u64,
    /// Files here whole already that the sender's digest matched.
    present: usize,
    /// Files put in place over files here (`--overwrite`).
    replaced: usize,
    /// Files here whole already that the sender's digest did not match, as
    /// shown to the user: left as they are.
    differ: Vec<String>,
    /// The last `Progress` told: bytes, and when (ns on the clock).
    told: (u64, Clock, u64),
}

impl Session {
    /// Tells the sender how many bytes are stored, at most every
    /// [`PROGRESS_EVERY`] and only when it moved: its progress shows what is here,
    /// not what its own buffers took.
    fn progress(&mut self, stored: &AtomicU64) {
        let bytes = stored.load(Ordering::Relaxed);
        let now = self.told.1.now().as_nanos();
        if bytes != self.told.0 && now - self.told.2 >= PROGRESS_EVERY.as_nanos() as u64 {
            self.told = (bytes, self.told.1, now);
            // A sender that is gone cannot hear it; its end comes as an event.
            let _ = self.writer.send(&Msg::Progress { bytes });
        }
    }

    /// File `i`, held whole, is being sent to replace it
    /// ([`Incoming::start_replacing`]).
    fn start_replacing(&self, i: usize) -> bool {
        self.incoming.lock().expect("no panics hold it")[i].start_replacing()
    }

    /// Whether file `i` is here whole already ([`Incoming::present`]).
    fn is_present(&self, i: usize) -> bool {
        self.incoming.lock().expect("no panics hold it")[i]
            .present
            .is_some()
    }

    /// The sender's digest of file `i`, here whole already, has come: the digest
    /// read back here, it is the same file and is confirmed as it is; another, it
    /// is another file of that name and size, which stays untouched and fails.
    /// Nothing is written either way. Returns how many files finished (0 or 1).
    fn check_present(&mut self, i: usize) -> usize {
        if self.done[i] {
            return 0;
        }
        self.done[i] = true;
        let (same, shown) = {
            let all = self.incoming.lock().expect("no panics hold it");
            let f = &all[i];
            (f.present == self.digests[i], f.shown.clone())
        };
        if same {
            self.present += 1;
        } else {
            self.differ.push(shown);
        }
        // A sender that is gone cannot hear it; its end comes as an event.
        let _ = self.writer.send(&Msg::FileDone {
            file: i as u32,
            ok: same,
        });
        1
    }

    /// Whether file `i` holds all its blocks.
    fn is_whole(&self, i: usize) -> bool {
        let all = self.incoming.lock().expect("no panics hold it");
        all[i].received == all[i].size
    }

    /// The sender's digest of file `i` says the kept blocks at `changed` differ on
    /// its side and are sent again: those not yet replaced stop counting, so the
    /// file is checked only once their new copies are in. (Offsets it did not
    /// keep, or has replaced already, are passed over.)
    fn forget_kept(&mut self, i: usize, changed: &[u64], block_size: u32) {
        let mut all = self.incoming.lock().expect("no panics hold it");
        let f = &mut all[i];
        for o in changed {
            if f.kept.remove(o) {
                f.hashes.remove(o);
                f.received -= (f.size - o).min(u64::from(block_size));
            }
        }
    }

    /// File `i` has all its blocks and its digest: compares them. A match joins the
    /// commit batch; a mismatch fails the file at once (nothing to resume from).
    /// Returns how many files that finished (0 or 1).
    fn check(&mut self, i: usize) -> Result<usize, TransferError> {
        if self.done[i] {
            return Ok(0);
        }
        let all = self.incoming.lock().expect("no panics hold it");
        let f = &all[i];
        let mut d = blake3::Hasher::new();
        for h in f.hashes.values() {
            d.update(h);
        }
        // Checked once: a file whose `Written` and digest both find it whole is
        // not batched (and renamed) twice.
        self.done[i] = true;
        if Some(*d.finalize().as_bytes()) == self.digests[i] {
            drop(all);
            self.batch.push(i);
            return Ok(0);
        }
        if let Some(p) = &f.place {
            let _ = p.dir.remove(&p.part);
            let _ = p.dir.remove(&p.journal);
        }
        drop(all);
        self.failed_files += 1;
        let _ = self.writer.send(&Msg::FileDone {
            file: i as u32,
            ok: false,
        });
        Ok(1)
    }

    /// Puts the batch's files in place: everything written reaches the disk first,
    /// with one `syncfs` for the batch rather than an fsync per file (100 000 small
    /// files); then each is renamed, and a second `syncfs` makes the renames last
    /// before any is confirmed, so a file the sender was told is done survives a
    /// power cut here. Returns how many finished.
    fn commit(&mut self) -> Result<usize, TransferError> {
        self.sync()?;
        let batch = std::mem::take(&mut self.batch);
        let mut placed = vec![];
        let mut failed = None;
        for i in batch {
            match self.place(i) {
                Ok(()) => placed.push(i),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Files put in place before a failure are confirmed all the same (a new
        // session would find them there and refuse to replace them).
        let synced = self.sync();
        if synced.is_ok() {
            for &i in &placed {
                // A sender that is gone cannot hear it, but the file is in place
                // all the same; its control channel's end arrives as an event of
                // its own.
                let _ = self.writer.send(&Msg::FileDone {
                    file: i as u32,
                    ok: true,
                });
            }
        }
        synced?;
        match failed {
            Some(e) => Err(e),
            None => Ok(placed.len()),
        }
    }

    /// Flushes the receiving file system (nothing, when nothing is written).
    fn sync(&self) -> Result<(), TransferError> {
        match &self.root {
            None => Ok(()),
            Some(root) => root
                .syncfs()
                .map_err(TransferError::io("syncfs".to_string())),
        }
    }

    /// Renames verified file `i` into place and drops its journal.
    fn place(&mut self, i: usize) -> Result<(), TransferError> {
        let (place, journaled, size, mode, mtime, replacing) = {
            let all = self.incoming.lock().expect("no panics hold it");
            let f = &all[i];
            (
                f.place.clone(),
                f.journaled,
                f.size,
                f.mode,
                f.mtime,
                f.replacing,
            )
        };
        if let Some(p) = place {
            let file = if size == 0 {
                // No block came to make it.
                p.dir.create_fresh(&p.part, PART_MODE)
            } else {
                p.dir.open_read(&p.part)
            }
            .map_err(p.io(&p.part))?;
            // Its own mode only now that it is whole and checked, set on the
            // descriptor (fchmod). A file system without Unix modes (vfat, some
            // CIFS mounts) refuses: the bytes are what was asked for, so the file
            // goes in place all the same.
            let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
            // And the sender's modification time, as `cp -p` and `rsync -t` give it
            // (every block is written, so nothing moves it again), by futimens. A
            // file system that cannot keep it keeps its own.
            if let Some(t) = mtime.and_then(system_time) {
                let _ = file.set_times(std::fs::FileTimes::new().set_modified(t));
            }
            drop(file);
            p.dir.rename(&p.part, &p.name).map_err(p.io(&p.name))?;
            if journaled {
                let _ = p.dir.remove(&p.journal);
            }
        }
        self.ok_files += 1;
        self.replaced += usize::from(replacing);
        self.bytes += size;
        Ok(())
    }
}

/// Stores a checked block of file `file` (or notes it damaged) and tells the
/// session when the file is complete.
///
/// The data is written without the session's lock: a channel's write, a large
/// `pwrite` at disk speed, would otherwise hold up every other channel's blocks.
/// The lock is taken only to claim the block (so a second copy is a duplicate even
/// while the first is being written) and to journal and count it once written.
fn store(
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
    sink: &Sink,
    b: BlockRepr,
    data: &[u8],
    trailer: &[u8],
    again: bool,
) -> Result<(), TransferError> {
    let block_size = sink.block_size;
    // Keyed: a block and its hash rewritten together on the path do not match.
    let ok = blake3::keyed_hash(&sink.block_key, data).as_bytes() == trailer;
    let hash: [u8; 32] = trailer.try_into().expect("32 bytes");
    let part = {
        let mut all = incoming.lock().expect("no panics hold it");
        // Only one of the file's own blocks: its offset a multiple of the block
        // size and its length what is left of the file, at most a block. Anything
        // else (empty, overlapping or misaligned) would make the byte count reach
        // the size twice, or never.
        let f = all
            .get_mut(b.file as usize)
            .filter(|f| {
                b.offset < f.size
                    && b.offset.is_multiple_of(u64::from(block_size))
                    && u64::from(b.len) == (f.size - b.offset).min(u64::from(block_size))
            })
            .ok_or_else(|| {
                TransferError::Protocol(format!(
                    "block {b:?} is not one of the offered files' blocks"
                ))
            })?;
        if !f.start_replacing() {
            // Its blocks are the file the receiver already had: never written over.
            return Err(TransferError::Protocol(format!(
                "block {b:?} of a file the receiver holds whole (the sender sends none)"
            )));
        }
        if !ok {
            let _ = events.send(Event::Corrupt(b.file, b.offset, b.len));
            return Ok(());
        }
        if f.kept.remove(&b.offset) {
            // A kept block the sender's file no longer matches: this copy replaces
            // it (and is counted again below).
            f.hashes.remove(&b.offset);
            f.received -= u64::from(b.len);
        } else if f.hashes.contains_key(&b.offset) {
            if again {
                return Ok(()); // asked for twice, and the first copy was good
            }
            return Err(TransferError::Protocol(format!(
                "block {b:?} arrived twice"
            )));
        }
        f.hashes.insert(b.offset, hash);
        if f.discard {
            None
        } else {
            match f.part_file() {
                Ok(part) => Some(part),
                Err(e) => {
                    f.hashes.remove(&b.offset);
                    return Err(e);
                }
            }
        }
    };
    #[cfg(test)]
    thread::sleep(tests::PAUSE_BEFORE_WRITE.get());
    let written = part.map_or(Ok(()), |file| file.write_all_at(data, b.offset));
    let mut all = incoming.lock().expect("no panics hold it");
    let f = &mut all[b.file as usize];
    let noted = written
        .map_err(|e| {
            let shown = f.place.as_ref().map_or(f.shown.clone(), |p| {
                p.dir.shown(&p.part).display().to_string()
            });
            TransferError::io(shown)(e)
        })
        .and_then(|()| f.note_written(b.offset, u64::from(b.len), &hash));
    if let Err(e) = noted {
        // Not journaled, so a resume sends it again.
        f.hashes.remove(&b.offset);
        return Err(e);
    }
    f.refetched += u64::from(again);
    sink.stored.fetch_add(u64::from(b.len), Ordering::Relaxed);
    if f.received == f.size {
        let _ = events.send(Event::Written(b.file as usize));
    }
    Ok(())
}

/// How long a connection to a data port has to present its ticket. The sender
/// writes it first thing, so this is many round trips even at 200 ms; it bounds
/// how long a connection that says nothing (a port scanner's connect) keeps the
/// sender waiting behind it.
const TICKET_WAIT: Duration = Duration::from_secs(5);

/// What a data channel's port needs to take its sender's connection.
struct Door {
    cfg: UdtConnConfig,
    /// How long to wait in all.
    timeout: Duration,
    impair: Option<Impairment>,
    /// The channel's index.
    c: usize,
    /// What the sender's connection opens with.
    ticket: [u8; 32],
    seal: Seal,
}

/// How blocks are checked, and how many bytes are stored so far.
struct Sink {
    block_size: u32,
    /// Blocks' hashes are BLAKE3 keyed with it ([`crate::secure::block_key`]).
    block_key: [u8; 32],
    /// File bytes written (or checked, when discarding) so far, for `Progress`.
    stored: AtomicU64,
}

/// Waits, at most `timeout`, for the sender's connection on data channel `c`: the
/// first that opens with the channel's ticket. Any other (a port scanner's
/// connect, a stranger, a sender of another session) is closed unread, counted in
/// `turned_away`, and the wait goes on: whoever finds a data port can neither put a
/// block into a file nor end the session.
fn accept_sender(
    mut l: Listener,
    door: Door,
    turned_away: &AtomicU64,
) -> Result<DataChannel, TransferError> {
    let Door {
        cfg,
        timeout,
        impair,
        c,
        ticket,
        mut seal,
    } = door;
    let clock = Clock::new();
    let elapsed = || Duration::from_nanos(clock.now().as_nanos());
    let mut refused = 0;
    loop {
        let left = timeout.saturating_sub(elapsed());
        let accepted = match l.accept(cfg, left, &mut seal) {
            Ok(s) => Some(s),
            // Out of time after turning connections away: say so.
            Err(_) if refused > 0 && elapsed() >= timeout => None,
            Err(e) => return Err(e),
        };
        let Some(mut s) = accepted else {
            return Err(TransferError::Protocol(format!(
                "data channel {c}: no connection opened with this session's ticket within \
                 {timeout:?}; {refused} that did not were closed unread (not this \
                 session's sender, or the ticket was damaged in transit)"
            )));
        };
        if let (Some(i), Some(u)) = (impair, s.udt()) {
            u.impair(Impairment {
                seed: i.seed ^ ((c as u64) << 32) ^ (refused << 48),
                ..i
            });
        }
        let mut got = [0u8; 32];
        // blake3::Hash compares in constant time: no timing says how much matched.
        if read_exact_within(&mut s, &mut got, TICKET_WAIT.min(left))
            && blake3::Hash::from(got) == blake3::Hash::from(ticket)
        {
            return Ok(s);
        }
        seal.restore(&mut s);
        refused += 1;
        turned_away.fetch_add(1, Ordering::Relaxed);
    }
}

/// Fills `buf` from `s` within about `max`; false if the connection ends, fails
/// or stays silent first.
fn read_exact_within(s: &mut DataChannel, buf: &mut [u8], max: Duration) -> bool {
    let clock = Clock::new();
    let mut got = 0;
    while got < buf.len() {
        let left = max.saturating_sub(Duration::from_nanos(clock.now().as_nanos()));
        match s.read_within(&mut buf[got..], left) {
            Ok(Some(n)) if n > 0 => got += n,
            _ => return false,
        }
    }
    true
}

/// One data channel, from its sender's first block to its end marker.
fn serve_channel(
    mut s: DataChannel,
    sink: &Sink,
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
) -> Result<(), TransferError> {
    let block_size = sink.block_size;
    let mut hdr = [0u8; HEADER_LEN];
    let mut buf = vec![0u8; block_size as usize + 32];
    while read_exact(&mut s, &mut hdr)? {
        if hdr == END_OF_CHANNEL {
            // Everything before it has arrived (the channel is in order). Stay a
            // little to acknowledge, but not for the transport's shutdown, which
            // UDT sends once and may lose.
            s.linger(Duration::from_secs(3))?;
            return Ok(());
        }
        let b = BlockRepr::parse(&BlockPacket::new_unchecked(&hdr[..]))
            .map_err(|_| TransferError::Protocol("a malformed block header".into()))?;
        if b.len > block_size {
            return Err(TransferError::Protocol(format!(
                "a block of {} bytes; the session's are {block_size}",
                b.len
            )));
        }
        let n = b.len as usize;
        if !read_exact(&mut s, &mut buf[..n + 32])? {
            return Err(TransferError::Protocol(
                "a data channel ended inside a block".into(),
            ));
        }
        let (data, trailer) = buf[..n + 32].split_at(n);
        store(incoming, events, sink, b, data, trailer, false)?;
    }
    Err(TransferError::Protocol(
        "a data channel ended before its end marker".into(),
    ))
}

/// The control channel's reading side: digests go to the session; blocks sent
/// again (after `Resend`) are checked and stored here.
fn serve_control(
    mut reader: ControlReader,
    sink: &Sink,
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
) {
    let block_size = sink.block_size;
    let mut buf = vec![0u8; block_size as usize + 32];
    let r = (|| -> Result<(), TransferError> {
        loop {
            match reader.recv()? {
                Msg::Block { file, offset, len } if len <= block_size => {
                    let n = len as usize;
                    reader.recv_raw(&mut buf[..n + 32])?;
                    let (data, trailer) = buf[..n + 32].split_at(n);
                    let b = BlockRepr { file, offset, len };
                    store(incoming, events, sink, b, data, trailer, true)?;
                }
                m => {
                    if events.send(Event::Ctl(Ok(m))).is_err() {
                        return Ok(());
                    }
                }
            }
        }
    })();
    if let Err(e) = r {
        let _ = events.send(Event::Ctl(Err(e)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::{send, SendOptions, Transport};
    use std::cell::Cell;

    /// A token strong enough to be taken.
    const TOKEN: &str = "unit-test-0123456789abcdef0123456789abcdef";

    thread_local! {
        /// How long `receive` on this thread waits after starting its channel
        /// threads, before the data phase.
        pub(super) static PAUSE_BEFORE_DATA_PHASE: Cell<Duration> =
            const { Cell::new(Duration::ZERO) };
        /// How long `store` on this thread waits between claiming a block and
        /// writing it.
        pub(super) static PAUSE_BEFORE_WRITE: Cell<Duration> =
            const { Cell::new(Duration::ZERO) };
        /// How often `receive` on this thread says how far it has read back.
        pub(super) static CHECKING_EVERY: Cell<Duration> =
            const { Cell::new(super::CHECKING_EVERY) };
    }

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
        let opts = RecvOptions::new(dst.path().to_path_buf(), TOKEN);
        let (tx, rx) = mpsc::channel();
        let h = thread::spawn(move || {
            PAUSE_BEFORE_DATA_PHASE.set(Duration::from_millis(500));
            receive(&opts, |a| tx.send(a).unwrap())
        });
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
        let opts = RecvOptions::new(dst.path().to_path_buf(), TOKEN);
        let (tx, rx) = mpsc::channel();
        let h = thread::spawn(move || {
            CHECKING_EVERY.set(Duration::ZERO);
            receive(&opts, |a| tx.send(a).unwrap())
        });
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
                    DataChannel::connect(transport, addr, cfg, wait, seal)
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
                let mut sender = DataChannel::connect(transport, addr, cfg, t, seal).unwrap();
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
        Mutex::new(
            sizes
                .iter()
                .map(|&size| Incoming {
                    place: None,
                    shown: String::new(),
                    journaled: false,
                    open: None,
                    size,
                    mode: 0o644,
                    received: 0,
                    hashes: BTreeMap::new(),
                    kept: HashSet::new(),
                    refetched: 0,
                    discard: true,
                    mtime: None,
                    present: None,
                    replace: false,
                    replacing: false,
                })
                .collect(),
        )
    }

    /// Stores `len` bytes at `offset` of file `file`, with a good trailer.
    fn put(
        incoming: &Mutex<Vec<Incoming>>,
        events: &mpsc::Sender<Event>,
        file: u32,
        offset: u64,
        len: u32,
    ) -> Result<(), TransferError> {
        let data = vec![7u8; len as usize];
        let sink = Sink {
            block_size: 100,
            block_key: [9; 32],
            stored: AtomicU64::new(0),
        };
        let trailer = *blake3::keyed_hash(&sink.block_key, &data).as_bytes();
        let b = BlockRepr { file, offset, len };
        store(incoming, events, &sink, b, &data, &trailer, false)
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
                PAUSE_BEFORE_WRITE.set(Duration::from_secs(3));
                put(&incoming, &events, 0, 0, 100)
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
