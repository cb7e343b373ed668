//! The sending side.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::transfer::{BlockRepr, FileBlocks, HEADER_LEN};
use longhaul_proto::udt::UdtConnConfig;

use super::channel::{DataChannel, Seal};
use super::control::{
    hex, unhex, Control, ControlReader, ControlWriter, DirEntry, FileEntry, Msg, Side, TimedStream,
    PROTOCOL_VERSION,
};
use super::{name_clash, NameClash, TransferError, END_OF_CHANNEL};
use crate::secure::{self, handshake_initiator, Preamble, SessionKeys};
use crate::Impairment;

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
    /// CHANNEL`) and per confirmation (`done FILE ok|failed`): what was sent, for
    /// audits and for measuring what a resume sends again.
    pub block_log: Option<PathBuf>,
    /// What they run.
    pub transport: super::Transport,
    /// Block size, bytes.
    pub block_size: u32,
    /// UDT parameters (socket IDs are set per channel).
    pub udt: UdtConnConfig,
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
    /// UDT4's parameters, 30 s per step; no log, progress counter or faults.
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
    /// Times a channel group waited for a confirmation before its next file (only
    /// without pipelining).
    pub confirmation_waits: u64,
    /// Blocks not sent because the receiver held them from an interrupted session
    /// (not counting the blocks of files it held whole, [`Self::present`]).
    pub skipped: u64,
    /// Blocks the receiver held from an interrupted session that no longer match
    /// the file here (it changed since), sent again (counted in `blocks` too).
    pub changed: u64,
    /// Files written to (their size or modification time moved) while their blocks
    /// were read: each block arrived as it was read and checked out, but the copy
    /// may mix the file's old and new contents. By name at the receiver.
    pub modified: Vec<String>,
}

/// What [`list_files`] found.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The files to send, sorted by name.
    pub files: Vec<ListedFile>,
    /// The folders, sorted by name: made at the receiver even if empty.
    pub dirs: Vec<ListedDir>,
    /// What is inside the directories given but not sent, and why.
    pub skipped: Vec<(PathBuf, Skip)>,
}

/// A file to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Where it is read from (empty for the generated file).
    pub source: PathBuf,
    /// Its `/`-separated name at the receiver.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Permission bits (`0o777`), which the receiver gives its copy (less its umask,
    /// as `cp` and `scp` do): a private file stays private.
    pub mode: u32,
    /// Modification time (seconds and nanoseconds since the Unix epoch), which
    /// the receiver gives its copy; `None` for the generated file.
    pub mtime: Option<(i64, u32)>,
}

/// A folder to make at the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedDir {
    /// Its `/`-separated name at the receiver.
    pub name: String,
    /// Permission bits (`0o777`), as for a file.
    pub mode: u32,
}

/// Why a path inside a directory given is not sent. (A path given itself is sent,
/// or is an error.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A symbolic link or a special file: links inside a tree are not followed
    /// (one could lead outside it, or round a loop); links given are.
    Special,
    /// The form of a receiver's working files ([`super::is_working_file`]), which
    /// no receiver accepts: left over from an interrupted session in a tree being
    /// sent on.
    Partial,
    /// A name that is not UTF-8, which the protocol's names are: it would arrive
    /// renamed. A directory so named is left out whole.
    NotUtf8,
}

/// The files under `paths`, and what is left out.
pub fn list_files(paths: &[PathBuf]) -> Result<Listing, TransferError> {
    fn walk(p: &Path, name: String, top: bool, out: &mut Listing) -> Result<(), TransferError> {
        // A path the user named is followed if it is a link (as `cp -H` does); the
        // links inside a tree are not: one could lead outside it, or round a loop.
        let m = if top {
            std::fs::metadata(p)
        } else {
            std::fs::symlink_metadata(p)
        }
        .map_err(TransferError::io(p.display().to_string()))?;
        if m.is_dir() {
            out.dirs.push(ListedDir {
                name: name.clone(),
                mode: m.permissions().mode() & 0o777,
            });
            for e in std::fs::read_dir(p).map_err(TransferError::io(p.display().to_string()))? {
                let e = e.map_err(TransferError::io(p.display().to_string()))?;
                match e.file_name().into_string() {
                    Ok(child) => walk(&e.path(), format!("{name}/{child}"), false, out)?,
                    Err(_) => out.skipped.push((e.path(), Skip::NotUtf8)),
                }
            }
        } else if m.is_file() {
            let file_name = name.rsplit('/').next().unwrap_or(&name);
            if !super::is_working_file(file_name) {
                out.files.push(ListedFile {
                    source: p.to_path_buf(),
                    name,
                    size: m.len(),
                    mode: m.permissions().mode() & 0o777,
                    mtime: Some((m.mtime(), m.mtime_nsec() as u32)),
                });
            } else if top {
                return Err(TransferError::Source(format!(
                    "{}: has the form of a longhaul receiver's partial file \
                     (.NAME.longhaul-part, .NAME.longhaul-journal), which no receiver \
                     accepts; rename it to send it",
                    p.display()
                )));
            } else {
                out.skipped.push((p.to_path_buf(), Skip::Partial));
            }
        } else if top {
            return Err(TransferError::Source(format!(
                "{}: not a regular file or a directory (only those are sent)",
                p.display()
            )));
        } else {
            out.skipped.push((p.to_path_buf(), Skip::Special));
        }
        Ok(())
    }
    let mut out = Listing::default();
    for p in paths {
        let name = p
            .canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|n| n.to_owned()))
            .ok_or_else(|| {
                TransferError::Source(format!("{}: no such file or directory", p.display()))
            })?
            .into_string()
            .map_err(|_| {
                TransferError::Source(format!(
                    "{}: its name is not UTF-8, which names in longhaul's protocol are; \
                     rename it to send it",
                    p.display()
                ))
            })?;
        walk(p, name, true, &mut out)?;
    }
    out.files.sort_by(|a, b| a.name.cmp(&b.name));
    out.dirs.sort_by(|a, b| a.name.cmp(&b.name));
    out.dirs.dedup_by(|a, b| a.name == b.name); // one folder given twice: its files clash below
    check_names(&out.files, &out.dirs)?;
    Ok(out)
}

/// Refuses a listing whose names the receiver could not all write ([`name_clash`]):
/// two files of one name (`a/x` and `b/x` given together), or a file whose name is
/// a folder's, or a folder of another's (a file `d` and a folder `d` given
/// together). The message names the paths given.
fn check_names(files: &[ListedFile], dirs: &[ListedDir]) -> Result<(), TransferError> {
    let file_names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    let dir_names: Vec<&str> = dirs.iter().map(|d| d.name.as_str()).collect();
    let Some(clash) = name_clash(&file_names, &dir_names) else {
        return Ok(());
    };
    // The sources of a name (two for a name given twice).
    let sources = |name: &str| -> Vec<String> {
        files
            .iter()
            .filter(|f| f.name == name)
            .map(|f| f.source.display().to_string())
            .collect()
    };
    let other_run = "send one of them in another run (a path given keeps only its last \
                     part as its name at the receiver)";
    Err(TransferError::Source(match clash {
        NameClash::Twice(name) => {
            let sources = sources(name);
            let each = if sources.len() == 2 { "both" } else { "all" };
            format!(
                "{} would {each} be `{name}` at the receiver: {other_run}",
                sources.join(" and ")
            )
        }
        NameClash::FileAndFolder(name) => format!(
            "{} would be `{name}` at the receiver, where a folder given is too: {other_run}",
            sources(name).join(" and ")
        ),
        NameClash::InsideFile { name, file } => format!(
            "`{name}` would be inside a folder `{file}` at the receiver, but {} is a file \
             of that name: {other_run}",
            sources(file).join(" and ")
        ),
    }))
}

/// One file's progress on the sending side.
struct FileState {
    /// Block hashes by block number (the digest hashes them in order); dropped once
    /// the digest is sent.
    hashes: Vec<[u8; 32]>,
    /// Blocks hashed so far.
    hashed: usize,
    /// Offsets of blocks the receiver held that differ here, sent again: they go
    /// with the digest, so the receiver does not check the file with its old copies.
    changed: Vec<u64>,
    /// Size and modification time when a lane took the file, before any block of it
    /// was read (`None` for the generated file, or if it could not be read).
    stamp: Option<(u64, std::time::SystemTime)>,
    /// The receiver's verdict, once it came.
    done: Option<bool>,
    /// Written to while its blocks were read.
    modified: bool,
    /// Sent whole to replace the receiver's copy, held whole with other contents.
    replaced: bool,
}

/// A group of channels working on one file at a time.
#[derive(Default)]
struct Lane {
    blocks: Option<FileBlocks>,
    /// The file the lane took last.
    file: Option<usize>,
    /// Whether the lane has started waiting for that file's verdict.
    waiting: bool,
}

/// A file's size and modification time, to tell whether it was written to.
fn file_stamp(p: &Path) -> Option<(u64, std::time::SystemTime)> {
    if p.as_os_str().is_empty() {
        return None; // the generated file
    }
    let m = std::fs::metadata(p).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// What every channel thread shares: which blocks go next, and the files' state.
struct Sched {
    next_file: usize,
    lanes: Vec<Lane>,
    files: Vec<FileState>,
    sizes: Vec<u64>,
    block_size: u32,
    pipelining: bool,
    /// Per file, the blocks the receiver holds already: their hashes by offset.
    have: Vec<HashMap<u64, [u8; 32]>>,
    /// Per file, the digest of the copy the receiver holds whole already
    /// (`Accept.present`): none of its blocks is sent, only hashed for the digest.
    present: Vec<Option<[u8; 32]>>,
    /// The receiver replaces files (`Accept.replace`): one it holds whole whose
    /// contents differ is sent whole once its digest shows it.
    replace: bool,
    /// Files to send whole after all (they differ at the receiver, which
    /// replaces them), before the next file of the offer.
    redo: std::collections::VecDeque<usize>,
    /// Files the receiver holds whole whose contents differ from this side's
    /// (indices), and which it does not replace: not sent.
    differ: Vec<usize>,
    sources: Arc<Vec<PathBuf>>,
    /// Blocks handed out to be sent, and the most that may be (a test's crash).
    handed: u64,
    limit: u64,
    confirmation_waits: u64,
    /// Set when the session is over for the channels: the control channel failed
    /// or every verdict is in.
    abort: Option<String>,
    log: Option<File>,
}

/// What a channel should do next.
enum Next {
    /// Send this block; or, if the receiver holds it (with this hash), only hash it,
    /// and send it only if it differs. The flag: the receiver holds the whole file.
    Block(BlockRepr, Option<[u8; 32]>, bool),
    /// Wait for the receiver to confirm the lane's last file, then ask again.
    Wait,
    /// Nothing is left for this lane.
    Done,
}

impl Sched {
    fn next(&mut self, lane: usize, channel: usize) -> Next {
        loop {
            if self.abort.is_some() {
                return Next::Done;
            }
            let l = &mut self.lanes[lane];
            if let Some(b) = l.blocks.as_mut().and_then(Iterator::next) {
                let held = self
                    .have
                    .get(b.file as usize)
                    .and_then(|h| h.get(&b.offset))
                    .copied();
                let whole = self.present[b.file as usize].is_some();
                if held.is_none() && !whole {
                    if self.handed == self.limit {
                        return Next::Done;
                    }
                    self.hand_out(&b, channel);
                }
                return Next::Block(b, held, whole);
            }
            // A file to send whole after all goes first, whatever else waits: the
            // lane may be waiting for its very verdict.
            if let Some(f) = self.redo.pop_front() {
                self.take(lane, f);
                continue;
            }
            if self.next_file >= self.sizes.len() {
                return Next::Done;
            }
            if !self.pipelining {
                if let Some(f) = l.file {
                    if self.files[f].done.is_none() {
                        if !l.waiting {
                            l.waiting = true;
                            self.confirmation_waits += 1;
                        }
                        return Next::Wait;
                    }
                }
            }
            let f = self.next_file;
            self.next_file += 1;
            self.take(lane, f);
        }
    }

    /// `lane` starts on file `f`: its blocks from the first.
    fn take(&mut self, lane: usize, f: usize) {
        self.files[f].stamp = file_stamp(&self.sources[f]);
        let l = &mut self.lanes[lane];
        l.blocks = Some(FileBlocks::new(f as u32, self.sizes[f], self.block_size));
        l.file = Some(f);
        l.waiting = false;
    }

    /// Block `b` goes out on `channel`: counted and logged.
    fn hand_out(&mut self, b: &BlockRepr, channel: usize) {
        self.handed += 1;
        self.log(format_args!(
            "block {} {} {} {channel}",
            b.file, b.offset, b.len
        ));
    }

    /// Block `b`, which the receiver holds, differs here: it goes out on `channel`
    /// after all, and the file's digest will say so.
    fn changed(&mut self, b: &BlockRepr, channel: usize) {
        self.hand_out(b, channel);
        self.files[b.file as usize].changed.push(b.offset);
    }

    /// One line to the block log, written whole (a crash leaves whole lines).
    fn log(&mut self, line: std::fmt::Arguments) {
        if let Some(f) = &mut self.log {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }

    /// Records block `b`'s hash; returns the file's digest, and the held blocks
    /// that changed, once every block of it is hashed (at most once per file, but
    /// for a file the receiver replaces: see below). Then it also notes whether
    /// the file was written to while its blocks were read.
    fn hashed(&mut self, b: &BlockRepr, hash: [u8; 32]) -> Option<Digest> {
        let i = b.file as usize;
        let f = &mut self.files[i];
        f.hashes[(b.offset / u64::from(self.block_size)) as usize] = hash;
        f.hashed += 1;
        if f.hashed < f.hashes.len() {
            return None;
        }
        if f.stamp.is_some() && f.stamp != file_stamp(&self.sources[i]) {
            self.files[i].modified = true;
        }
        let digest = digest_of(std::mem::take(&mut self.files[i].hashes));
        if self.present[i].is_some_and(|theirs| theirs != digest) {
            if !self.replace {
                // Another file of this name and size there: not sent, not replaced.
                self.differ.push(i);
            } else {
                // Another file there, which the receiver replaces: every block
                // goes now, and the digest after them. The first reading was
                // only hashed.
                self.present[i] = None;
                let f = &mut self.files[i];
                f.replaced = true;
                f.hashes =
                    vec![[0; 32]; self.sizes[i].div_ceil(u64::from(self.block_size)) as usize];
                f.hashed = 0;
                self.redo.push_back(i);
                return None;
            }
        }
        Some(Digest {
            digest,
            changed: std::mem::take(&mut self.files[i].changed),
            replaced: self.files[i].replaced,
        })
    }
}

/// What a file's `Digest` message says.
struct Digest {
    digest: [u8; 32],
    /// Held blocks that changed, sent again.
    changed: Vec<u64>,
    /// Sent whole to replace the receiver's copy.
    replaced: bool,
}

/// A file's digest: BLAKE3 over its blocks' hashes in order.
fn digest_of(hashes: Vec<[u8; 32]>) -> [u8; 32] {
    let mut d = blake3::Hasher::new();
    for h in &hashes {
        d.update(h);
    }
    *d.finalize().as_bytes()
}

/// What the channel threads and the verdict thread share. (A channel waiting for a
/// verdict polls it every millisecond rather than sleeping on a condition: it has to
/// keep driving its UDT socket meanwhile.)
type Shared = Arc<Mutex<Sched>>;

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
    let (mut ctl, keys) = open_session(opts)?;
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
                        .map(|(o, h)| Some((o, unhex(&h)?.try_into().ok()?)))
                        .collect::<Option<HashMap<u64, [u8; 32]>>>()
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| TransferError::Protocol("a bad block hash in Accept".into()))?;
            let mut whole = vec![None; files.len()];
            for (i, digest) in present {
                let d = unhex(&digest).and_then(|d| <[u8; 32]>::try_from(d).ok());
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
            .map(|&s| FileState {
                hashes: vec![[0u8; 32]; s.div_ceil(u64::from(opts.block_size)) as usize],
                hashed: 0,
                changed: vec![],
                stamp: None,
                done: None,
                modified: false,
                replaced: false,
            })
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
    for (c, port) in ports.into_iter().enumerate() {
        let addr = SocketAddr::new(opts.dest.ip(), port);
        let cfg = UdtConnConfig {
            // Random, as UDT4's are: a stranger cannot guess what a forged
            // packet must carry.
            socket_id: u32::from_be_bytes(secure::random_bytes()).max(1),
            isn: u32::from_be_bytes(secure::random_bytes()) & 0x3fff_ffff,
            ..opts.udt
        };
        let lane = c / usize::from(opts.channels);
        let (shared, writer, sources) = (shared.clone(), writer.clone(), sources.clone());
        let (timeout, block_size, impair) = (opts.timeout, opts.block_size, opts.impair);
        let transport = opts.transport;
        let ticket = keys.ticket(c);
        let seal = Seal::new(&keys, c, Side::Sender, transport, opts.encrypt);
        threads.push(thread::spawn(
            move || -> Result<(u64, u64, u64, u64), TransferError> {
                let mut s = DataChannel::connect(transport, addr, cfg, timeout, seal)?;
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
                let mut buf = vec![0u8; HEADER_LEN + block_size as usize + 32];
                let (mut bytes, mut blocks, mut skipped, mut changed) = (0, 0, 0, 0);
                loop {
                    let next = shared.lock().expect("no panics hold it").next(lane, c);
                    let (b, held, whole) = match next {
                        Next::Block(b, held, whole) => (b, held, whole),
                        Next::Done => break,
                        Next::Wait => {
                            // Keep the channel going while the receiver confirms.
                            s.idle(Duration::from_millis(1))?;
                            continue;
                        }
                    };
                    let n = b.len as usize;
                    b.emit(&mut buf[..HEADER_LEN]);
                    let data = &mut buf[HEADER_LEN..HEADER_LEN + n];
                    read_block(&sources, &mut open, b.file, data, b.offset)?;
                    let h = *blake3::keyed_hash(&block_key, data).as_bytes();
                    buf[HEADER_LEN + n..HEADER_LEN + n + 32].copy_from_slice(&h);
                    let differs = held.is_some_and(|held| held != h);
                    if differs {
                        shared.lock().expect("no panics hold it").changed(&b, c);
                        changed += 1;
                    }
                    if (held.is_none() && !whole) || differs {
                        s.write_all(&buf[..HEADER_LEN + n + 32])?;
                        bytes += u64::from(b.len);
                        blocks += 1;
                    } else if !whole {
                        skipped += 1;
                    }
                    // After the block is on its way: the digest follows its blocks.
                    let digest = shared.lock().expect("no panics hold it").hashed(&b, h);
                    if let Some(d) = digest {
                        send_digest(&writer, b.file as usize, d)?;
                    }
                }
                s.write_all(&END_OF_CHANNEL)?;
                s.finish(timeout.max(Duration::from_secs(60)))?;
                Ok((bytes, blocks, skipped, changed))
            },
        ));
    }
    let (mut bytes, mut blocks, mut skipped, mut changed) = (0, 0, 0, 0);
    let mut failure = None;
    for t in threads {
        match t.join().expect("channel thread") {
            Ok((b, n, k, c)) => {
                bytes += b;
                blocks += n;
                skipped += k;
                changed += c;
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
        skipped,
        changed,
        modified,
        confirmation_waits,
    })
}

/// Fills `buf` with the bytes of a `synthetic` file from `offset`: 64-bit words
/// of a Weyl sequence (word `i` is `i × 0x9E37_79B9_7F4A_7C15`, little-endian),
/// so that every block differs and a receiver can check any byte without the file.
pub fn synthetic_fill(buf: &mut [u8], offset: u64) {
    let word = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    // Up to the first word boundary byte by byte, then whole words (fast enough
    // not to be what limits a 10 Gb/s sender), then the tail.
    let head = ((8 - offset % 8) % 8).min(buf.len() as u64) as usize;
    for (k, b) in buf[..head].iter_mut().enumerate() {
        let o = offset + k as u64;
        *b = word(o / 8)[(o % 8) as usize];
    }
    let mut i = (offset + head as u64) / 8;
    let mut words = buf[head..].chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&word(i));
        i += 1;
    }
    for (k, b) in words.into_remainder().iter_mut().enumerate() {
        *b = word(i)[k];
    }
}

/// Reads `data.len()` bytes of file `file` at `offset` (or generates them, for the
/// synthetic file), keeping the one file a channel works on open in `open`.
fn read_block(
    sources: &[PathBuf],
    open: &mut Option<(u32, File)>,
    file: u32,
    data: &mut [u8],
    offset: u64,
) -> Result<(), TransferError> {
    let p = &sources[file as usize];
    if p.as_os_str().is_empty() {
        synthetic_fill(data, offset);
        return Ok(());
    }
    if open.as_ref().is_none_or(|(i, _)| *i != file) {
        let f = File::open(p).map_err(TransferError::io(p.display().to_string()))?;
        *open = Some((file, f));
    }
    let f = &open.as_ref().expect("opened above").1;
    f.read_exact_at(data, offset)
        .map_err(TransferError::io(format!(
            "{}: reading (did it shrink?)",
            p.display()
        )))
}

fn send_digest(writer: &Mutex<ControlWriter>, file: usize, d: Digest) -> Result<(), TransferError> {
    writer
        .lock()
        .expect("no panics hold it")
        .send(&Msg::Digest {
            file: file as u32,
            digest: hex(&d.digest),
            changed: d.changed,
            replaced: d.replaced,
        })
}

/// What the verdict thread needs to send a block again.
struct Resends {
    sources: Arc<Vec<PathBuf>>,
    sizes: Vec<u64>,
    block_size: u32,
    block_key: [u8; 32],
}

/// Connects to the receiver, runs the handshake (the receiver proves the token
/// before anything about the files is said) and sends the key confirmation.
fn open_session(opts: &SendOptions) -> Result<(Control, SessionKeys), TransferError> {
    let tcp = TcpStream::connect_timeout(&opts.dest, opts.timeout)
        .map_err(TransferError::io(format!("connecting to {}", opts.dest)))?;
    tcp.set_read_timeout(Some(opts.timeout))
        .map_err(TransferError::io("control channel"))?;
    let mut stream = TimedStream::new(tcp);
    let preamble = Preamble {
        version: PROTOCOL_VERSION,
        encrypt: opts.encrypt,
    };
    let keys = handshake_initiator(&mut stream, &secure::psk(&opts.token), preamble)?;
    // Then a step's wait, or longer: the receiver reads back what it holds.
    stream
        .get_ref()
        .set_read_timeout(Some(opts.timeout.max(Duration::from_secs(600))))
        .map_err(TransferError::io("control channel"))?;
    let mut ctl = Control::new(stream, &keys, Side::Sender, secure::MAX_RECORD)?;
    ctl.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
    })?;
    Ok((ctl, keys))
}

/// The control channel's reading side for the whole data phase: records each
/// file's verdict (waking a channel group that waits for it), answers resend
/// requests, and ends at `Finished`. Returns the failed files and the blocks resent.
fn verdicts(
    mut reader: ControlReader,
    shared: &Shared,
    writer: &Mutex<ControlWriter>,
    files: &Resends,
    progress: Option<Arc<AtomicU64>>,
) -> Result<(Vec<usize>, u64), TransferError> {
    let Resends {
        sources,
        sizes,
        block_size,
        block_key,
    } = files;
    let block_size = *block_size;
    let mut serve = || -> Result<(Vec<usize>, u64), TransferError> {
        let (mut bad, mut resent) = (vec![], 0);
        loop {
            let m = reader.recv()?;
            match m {
                Msg::FileDone { file, ok } => {
                    let mut s = shared.lock().expect("no panics hold it");
                    let Some(f) = s.files.get_mut(file as usize) else {
                        return Err(TransferError::Protocol(format!(
                            "a verdict for file {file}, which was not offered"
                        )));
                    };
                    f.done = Some(ok);
                    s.log(format_args!(
                        "done {file} {}",
                        if ok { "ok" } else { "failed" }
                    ));
                    if !ok {
                        bad.push(file as usize);
                    }
                }
                Msg::Resend { blocks } => {
                    for (file, offset, len) in blocks {
                        let known = (file as usize) < sources.len()
                            && offset.saturating_add(u64::from(len)) <= sizes[file as usize]
                            && len <= block_size;
                        if !known {
                            return Err(TransferError::Protocol(format!(
                                "asked again for block {file}@{offset}, which was never sent"
                            )));
                        }
                        let mut data = vec![0u8; len as usize];
                        read_block(sources, &mut None, file, &mut data, offset)?;
                        let hash = blake3::keyed_hash(block_key, &data);
                        writer.lock().expect("no panics hold it").send_with(
                            &Msg::Block { file, offset, len },
                            &[&data, hash.as_bytes()],
                        )?;
                        resent += 1;
                    }
                }
                Msg::Progress { bytes } => {
                    if let Some(p) = &progress {
                        p.store(bytes, Ordering::Relaxed);
                    }
                }
                Msg::Finished => return Ok((bad, resent)),
                Msg::Reject { reason } => return Err(TransferError::ReceiverGaveUp(reason)),
                m => return Err(TransferError::Protocol(format!("unexpected {m:?}"))),
            }
        }
    };
    let result = serve();
    if let Err(e) = &result {
        // The channels must not wait for verdicts that will not come.
        shared.lock().expect("no panics hold it").abort = Some(e.to_string());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::{list_files, synthetic_fill, Skip};
    use std::path::PathBuf;

    /// Any slice of the synthetic file, at any offset and length, is the same bytes
    /// as that range of the whole file generated at once.
    #[test]
    fn synthetic_slices_agree_with_the_whole() {
        let mut whole = vec![0u8; 1000];
        synthetic_fill(&mut whole, 0);
        assert_ne!(whole[..8], whole[8..16], "words differ");
        for offset in [0usize, 1, 7, 8, 9, 13, 500] {
            for len in [0usize, 1, 3, 8, 15, 16, 17, 200] {
                let mut part = vec![0u8; len];
                synthetic_fill(&mut part, offset as u64);
                assert_eq!(part, whole[offset..offset + len], "{offset}+{len}");
            }
        }
    }

    /// A path given that is a link is followed; links inside a tree are listed as
    /// not sent (one could lead outside the tree, or round a loop); a path given
    /// that is neither a file nor a directory is refused. (A link given as the path
    /// used to send nothing, without a word.)
    #[test]
    fn links_given_are_followed_and_links_inside_are_listed_not_sent() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("a"), "aa").unwrap();
        std::fs::write(tree.join("sub/b"), "b").unwrap();
        symlink("/etc/hostname", tree.join("out")).unwrap();
        symlink(&tree, tree.join("sub/loop")).unwrap();
        let link = tmp.path().join("link");
        symlink(&tree, &link).unwrap();
        let l = list_files(std::slice::from_ref(&link)).unwrap();
        let names: Vec<(&str, u64)> = l.files.iter().map(|f| (f.name.as_str(), f.size)).collect();
        assert_eq!(names, [("tree/a", 2), ("tree/sub/b", 1)]);
        let mut skipped = l.skipped.clone();
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            skipped,
            [
                (link.join("out"), Skip::Special),
                (link.join("sub/loop"), Skip::Special)
            ]
        );
        let e = list_files(&[PathBuf::from("/dev/null")]).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    /// A receiver's working files in a tree, and names that are not UTF-8 (which
    /// would arrive renamed), are listed as not sent, with why; given by name, each
    /// is an error.
    #[test]
    fn partial_files_and_names_not_utf8_are_not_sent() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        let odd = std::ffi::OsStr::from_bytes(b"caf\xe9");
        std::fs::create_dir_all(tree.join(odd)).unwrap();
        for f in [
            "x",
            ".x.longhaul-part",
            ".x.longhaul-journal",
            "y.longhaul-part",
        ] {
            std::fs::write(tree.join(f), f).unwrap();
        }
        std::fs::write(tree.join(odd).join("inside"), "i").unwrap();
        let odd_file = tree.join(std::ffi::OsStr::from_bytes(b"n\xffo"));
        std::fs::write(&odd_file, "n").unwrap();
        let l = list_files(std::slice::from_ref(&tree)).unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["tree/x", "tree/y.longhaul-part"]);
        let mut skipped = l.skipped.clone();
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            skipped,
            [
                (tree.join(".x.longhaul-journal"), Skip::Partial),
                (tree.join(".x.longhaul-part"), Skip::Partial),
                (tree.join(odd), Skip::NotUtf8),
                (odd_file.clone(), Skip::NotUtf8),
            ]
        );
        let e = list_files(&[odd_file]).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        let e = list_files(&[tree.join(".x.longhaul-part")]).unwrap_err();
        assert!(e.to_string().contains("rename it to send it"), "{e}");
    }

    /// Names the receiver could not all write are refused before anything is sent,
    /// naming both sources.
    #[test]
    fn clashing_names_are_refused_naming_both_sources() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |rel: &str| tmp.path().join(rel);
        for d in ["a/d", "b", "c/d", "e"] {
            std::fs::create_dir_all(p(d)).unwrap();
        }
        for f in ["a/d/x", "a/x", "b/x", "c/d/y", "e/d", "a/d-1"] {
            std::fs::write(p(f), f).unwrap();
        }
        let refused = |paths: &[&str], want: &[String]| {
            let paths: Vec<PathBuf> = paths.iter().map(|r| p(r)).collect();
            let e = list_files(&paths).unwrap_err().to_string();
            for w in want {
                assert!(e.contains(w.as_str()), "{paths:?}: {e}");
            }
        };
        let shown = |rel: &str| p(rel).display().to_string();
        // Two files, one name.
        refused(&["a/x", "b/x"], &[shown("a/x"), shown("b/x"), "`x`".into()]);
        // The same path twice.
        refused(&["a/x", "a/x"], &["would both be `x`".into()]);
        // A file `d` and a folder `d` (with `d-1` sorting between them).
        refused(
            &["a/d", "a/d-1", "e/d"],
            &[shown("e/d"), "where a folder given is too".into()],
        );
        // Two folders of one name are fine while the files in them differ.
        let l = list_files(&[p("a/d"), p("c/d")]).unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["d/x", "d/y"]);
    }
}
