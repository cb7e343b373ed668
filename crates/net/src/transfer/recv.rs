//! The receiving side.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::transfer::{BlockRepr, HEADER_LEN};
use longhaul_proto::udt::UdtConnConfig;
use longhaul_wire::block::BlockPacket;

use super::channel::{DataChannel, Listener};
use super::control::{hex, unhex, Control, Msg, PROTOCOL_VERSION};
use super::{key, safe_join, TransferError, END_OF_CHANNEL};
use crate::Impairment;

/// How to receive.
#[derive(Debug, Clone)]
pub struct RecvOptions {
    /// Where files go; nothing is written outside it.
    pub dir: PathBuf,
    /// The control address to listen on.
    pub listen: SocketAddr,
    /// The pre-shared token.
    pub token: String,
    /// Whether an existing file may be replaced.
    pub overwrite: bool,
    /// UDT parameters (socket IDs are set per channel).
    pub udt: UdtConnConfig,
    /// How long to wait for the sender at each step.
    pub timeout: Duration,
    /// Faults to inject into the data channels' datagrams (tests).
    pub impair: Option<Impairment>,
}

/// What a receive did.
#[derive(Debug, Clone)]
pub struct RecvSummary {
    /// The sender's address.
    pub peer: SocketAddr,
    /// Files written and verified.
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Blocks that failed their hash on arrival and were fetched again.
    pub refetched: u64,
}

/// Most channels and the largest block a sender may ask for.
const MAX_CHANNELS: u16 = 256;
const MAX_BLOCK: u32 = 256 << 20;

/// One file being received.
struct Incoming {
    path: PathBuf,
    part: PathBuf,
    /// Blocks written and checked, one line each, so that a new session can resume.
    journal_path: PathBuf,
    /// Whether the file has a journal: only files of more than one block. A file of
    /// one block is all or nothing, so a journal would save nothing and cost two
    /// file creations and a deletion per small file.
    journaled: bool,
    /// The part file and the journal, open only while blocks of the file arrive
    /// (closed once it is complete, so many small files do not exhaust descriptors).
    open: Option<(File, Option<File>)>,
    size: u64,
    received: u64,
    /// Block hashes by offset.
    hashes: BTreeMap<u64, [u8; 32]>,
    /// Blocks whose data did not match their hash: (offset, length).
    corrupt: Vec<(u64, u32)>,
}

fn random_nonce() -> Result<[u8; 32], TransferError> {
    let mut n = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut n))
        .map_err(TransferError::io("reading /dev/urandom"))?;
    Ok(n)
}

impl Incoming {
    /// Writes a checked block at its offset and appends it to the journal. The
    /// block that completes the file closes both.
    fn write_block(&mut self, data: &[u8], offset: u64, hash: &[u8]) -> Result<(), TransferError> {
        if self.open.is_none() {
            // A journaled part file was made at the offer; a one-block file's part
            // is made by its block.
            let file = OpenOptions::new()
                .write(true)
                .create(!self.journaled)
                .truncate(!self.journaled)
                .open(&self.part)
                .map_err(TransferError::io(self.part.display().to_string()))?;
            let journal = if self.journaled {
                Some(
                    OpenOptions::new()
                        .append(true)
                        .open(&self.journal_path)
                        .map_err(TransferError::io(self.journal_path.display().to_string()))?,
                )
            } else {
                None
            };
            self.open = Some((file, journal));
        }
        let (file, journal) = self.open.as_mut().expect("opened above");
        file.write_all_at(data, offset)
            .map_err(TransferError::io(self.part.display().to_string()))?;
        if let Some(journal) = journal {
            writeln!(journal, "{offset} {}", hex(hash))
                .map_err(TransferError::io(self.journal_path.display().to_string()))?;
        }
        self.received += data.len() as u64;
        if self.received == self.size {
            self.open = None;
        }
        Ok(())
    }
}

/// The blocks a journal records for a file of `size` bytes in `block_size` blocks,
/// or `None` if there is none or it belongs to another file or block size. A
/// torn last line (a crash while writing it) is ignored.
fn read_journal(
    path: &std::path::Path,
    size: u64,
    block_size: u32,
) -> Option<BTreeMap<u64, [u8; 32]>> {
    let text = std::fs::read_to_string(path).ok()?;
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
/// `listening` is told the bound address (port 0 picks one).
pub fn receive(
    opts: &RecvOptions,
    listening: impl FnOnce(SocketAddr),
) -> Result<RecvSummary, TransferError> {
    let listener = TcpListener::bind(opts.listen)
        .map_err(TransferError::io(format!("listening on {}", opts.listen)))?;
    listening(
        listener
            .local_addr()
            .map_err(TransferError::io("listening"))?,
    );
    let (tcp, peer) = listener.accept().map_err(TransferError::io("accepting"))?;
    tcp.set_read_timeout(Some(opts.timeout.max(Duration::from_secs(600))))
        .map_err(TransferError::io("control channel"))?;
    let mut ctl = Control::new(tcp)?;
    match ctl.recv()? {
        Msg::Hello { version } if version == PROTOCOL_VERSION => {}
        Msg::Hello { version } => {
            let reason =
                format!("protocol version {version}; this receiver speaks {PROTOCOL_VERSION}");
            ctl.send(&Msg::Reject {
                reason: reason.clone(),
            })?;
            return Err(TransferError::Protocol(reason));
        }
        m => {
            return Err(TransferError::Protocol(format!(
                "expected hello, got {m:?}"
            )))
        }
    }
    let nonce = random_nonce()?;
    ctl.send(&Msg::Challenge { nonce: hex(&nonce) })?;
    let mac = match ctl.recv()? {
        Msg::Auth { mac } => unhex(&mac).and_then(|m| <[u8; 32]>::try_from(m).ok()),
        m => return Err(TransferError::Protocol(format!("expected auth, got {m:?}"))),
    };
    let expected = blake3::keyed_hash(&key(&opts.token), &nonce);
    // blake3::Hash compares in constant time.
    if mac.map(blake3::Hash::from) != Some(expected) {
        ctl.send(&Msg::Reject {
            reason: "authentication failed".into(),
        })?;
        return Err(TransferError::Auth);
    }
    let (files, channels, block_size, transport) = match ctl.recv()? {
        Msg::Offer {
            files,
            channels,
            block_size,
            transport,
        } => (files, channels, block_size, transport),
        m => {
            return Err(TransferError::Protocol(format!(
                "expected an offer, got {m:?}"
            )))
        }
    };
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
    if need > super::MEMORY_CAP {
        let e = TransferError::Protocol(format!(
            "{channels} channels of {block_size}-byte blocks would need {} MiB of buffers here; at most {} MiB (fewer channels or smaller blocks)",
            need >> 20,
            super::MEMORY_CAP >> 20
        ));
        return Err(refuse(&mut ctl, e));
    }
    // Check every name before anything is written.
    let mut targets = vec![];
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        let path = match safe_join(&opts.dir, &f.path) {
            Ok(p) => p,
            Err(e) => return Err(refuse(&mut ctl, e)),
        };
        if !opts.overwrite && std::fs::symlink_metadata(&path).is_ok() {
            let e =
                TransferError::Protocol(format!("`{}` exists (allow with --overwrite)", f.path));
            return Err(refuse(&mut ctl, e));
        }
        if !seen.insert(path.clone()) {
            let e = TransferError::Protocol(format!("`{}` is offered twice", f.path));
            return Err(refuse(&mut ctl, e));
        }
        targets.push((path, f.size));
    }
    // Room for everything, before anything is written.
    let need: u64 = targets.iter().map(|t| t.1).fold(0, u64::saturating_add);
    let free = fs4::available_space(&opts.dir).map_err(TransferError::io(format!(
        "{}: free space",
        opts.dir.display()
    )))?;
    if need > free {
        let e = TransferError::Protocol(format!(
            "the files need {need} bytes and {} has {free} free",
            opts.dir.display()
        ));
        return Err(refuse(&mut ctl, e));
    }
    let mut incoming = vec![];
    let mut have = vec![];
    let mut made_dir = None;
    for (path, size) in targets {
        let parent = path
            .parent()
            .expect("joined under the directory")
            .to_path_buf();
        // Files of a directory come together: make each directory once.
        if made_dir.as_ref() != Some(&parent) {
            std::fs::create_dir_all(&parent)
                .map_err(TransferError::io(parent.display().to_string()))?;
            made_dir = Some(parent.clone());
        }
        let name = path.file_name().expect("a file name").to_string_lossy();
        let part = parent.join(format!(".{name}.longhaul-part"));
        let journal_path = parent.join(format!(".{name}.longhaul-journal"));
        let journaled = size > u64::from(block_size);
        let mut hashes = BTreeMap::new();
        if journaled {
            // A journal from an interrupted session of the same file and block size
            // says which blocks the part file already holds, checked on arrival.
            let kept = read_journal(&journal_path, size, block_size).filter(|_| part.exists());
            // Made (or kept) here and closed again: blocks reopen it as they come.
            let file = OpenOptions::new()
                .create(true)
                .truncate(kept.is_none())
                .write(true)
                .open(&part)
                .map_err(TransferError::io(part.display().to_string()))?;
            file.set_len(size)
                .map_err(TransferError::io(part.display().to_string()))?;
            drop(file);
            hashes = kept.unwrap_or_default();
            if hashes.is_empty() {
                std::fs::write(
                    &journal_path,
                    format!("longhaul-journal 1 {size} {block_size}\n"),
                )
                .map_err(TransferError::io(journal_path.display().to_string()))?;
            }
        }
        have.push(hashes.keys().copied().collect::<Vec<u64>>());
        let received = hashes
            .keys()
            .map(|&o| (size - o).min(u64::from(block_size)))
            .sum();
        incoming.push(Incoming {
            path,
            part,
            journal_path,
            journaled,
            open: None,
            size,
            received,
            hashes,
            corrupt: vec![],
        });
    }
    let incoming = Arc::new(Mutex::new(incoming));
    let mut listeners = vec![];
    for _ in 0..channels {
        listeners.push(Listener::bind(
            transport,
            SocketAddr::new(opts.listen.ip(), 0),
        )?);
    }
    let ports = listeners
        .iter()
        .map(Listener::port)
        .collect::<Result<Vec<_>, _>>()?;
    ctl.send(&Msg::Accept { ports, have })?;
    let mut threads = vec![];
    for (c, l) in listeners.into_iter().enumerate() {
        let cfg = UdtConnConfig {
            socket_id: 1000 + c as u32,
            ..opts.udt
        };
        let (incoming, timeout, impair) = (incoming.clone(), opts.timeout, opts.impair);
        threads.push(thread::spawn(move || -> Result<(), TransferError> {
            let mut s = l.accept(cfg, timeout)?;
            if let (Some(i), Some(u)) = (impair, s.udt()) {
                u.impair(Impairment {
                    seed: i.seed ^ ((c as u64) << 32),
                    ..i
                });
            }
            let mut hdr = [0u8; HEADER_LEN];
            let mut buf = vec![0u8; block_size as usize + 32];
            while read_exact(&mut s, &mut hdr)? {
                if hdr == END_OF_CHANNEL {
                    // Everything before it has arrived (the channel is in order).
                    // Stay a little to acknowledge, but not for the transport's
                    // shutdown, which UDT sends once and may lose.
                    s.linger(Duration::from_secs(3))?;
                    break;
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
                let ok = blake3::hash(data).as_bytes() == trailer;
                let mut all = incoming.lock().expect("no panics hold it");
                let f = all
                    .get_mut(b.file as usize)
                    .filter(|f| b.end() <= f.size)
                    .ok_or_else(|| {
                        TransferError::Protocol(format!("block {b:?} is outside the offered files"))
                    })?;
                if f.hashes
                    .insert(b.offset, trailer.try_into().expect("32 bytes"))
                    .is_some()
                {
                    return Err(TransferError::Protocol(format!(
                        "block {b:?} arrived twice"
                    )));
                }
                if ok {
                    f.write_block(data, b.offset, trailer)?;
                } else {
                    f.corrupt.push((b.offset, b.len));
                }
            }
            Ok(())
        }));
    }
    // The digests come once the sender has handed every block to its channels.
    let mut digests: Vec<Option<[u8; 32]>> = vec![None; files.len()];
    // Counted, not searched for: a scan per digest is quadratic in the file count.
    let mut missing = files.len();
    while missing > 0 {
        match ctl.recv()? {
            Msg::Digest { file, digest } => {
                let d = unhex(&digest).and_then(|d| <[u8; 32]>::try_from(d).ok());
                match (digests.get_mut(file as usize), d) {
                    (Some(slot @ None), Some(d)) => {
                        *slot = Some(d);
                        missing -= 1;
                    }
                    _ => {
                        return Err(TransferError::Protocol(format!(
                            "a bad digest for file {file}"
                        )))
                    }
                }
            }
            m => {
                return Err(TransferError::Protocol(format!(
                    "expected digests, got {m:?}"
                )))
            }
        }
    }
    let mut failure = None;
    for t in threads {
        if let Err(e) = t.join().expect("channel thread") {
            failure = failure.or(Some(e));
        }
    }
    let mut all = std::mem::take(&mut *incoming.lock().expect("no panics hold it"));
    // Blocks that arrived damaged are fetched again over the control channel, a
    // few rounds at most.
    let mut refetched = 0;
    for _round in 0..3 {
        let blocks: Vec<(u32, u64, u32)> = all
            .iter()
            .enumerate()
            .flat_map(|(i, f)| f.corrupt.iter().map(move |&(o, l)| (i as u32, o, l)))
            .collect();
        if blocks.is_empty() || failure.is_some() {
            break;
        }
        ctl.send(&Msg::Resend {
            blocks: blocks.clone(),
        })?;
        for f in &mut all {
            f.corrupt.clear();
        }
        let mut buf = vec![0u8; block_size as usize + 32];
        for &(file, offset, len) in &blocks {
            match ctl.recv()? {
                Msg::Block {
                    file: bf,
                    offset: bo,
                    len: bl,
                } if (bf, bo, bl) == (file, offset, len) => {}
                m => {
                    return Err(TransferError::Protocol(format!(
                        "expected block {file}@{offset}, got {m:?}"
                    )))
                }
            }
            let n = len as usize;
            ctl.recv_raw(&mut buf[..n + 32])?;
            let (data, trailer) = buf[..n + 32].split_at(n);
            let f = &mut all[file as usize];
            if blake3::hash(data).as_bytes() == trailer {
                f.write_block(data, offset, trailer)?;
                f.hashes
                    .insert(offset, trailer.try_into().expect("32 bytes"));
                refetched += 1;
            } else {
                f.corrupt.push((offset, len));
            }
        }
    }
    // Everything written reaches the disk before any file is renamed into place:
    // one syncfs for the session, not one fsync per file (100 000 small files).
    let root = File::open(&opts.dir).map_err(TransferError::io(opts.dir.display().to_string()))?;
    nix::unistd::syncfs(root.as_raw_fd())
        .map_err(|e| TransferError::io(format!("{}: syncfs", opts.dir.display()))(e.into()))?;
    let (mut ok_files, mut bytes) = (0, 0);
    for (i, f) in all.into_iter().enumerate() {
        let mut d = blake3::Hasher::new();
        for h in f.hashes.values() {
            d.update(h);
        }
        let good = failure.is_none()
            && f.corrupt.is_empty()
            && f.received == f.size
            && Some(*d.finalize().as_bytes()) == digests[i];
        if good {
            if f.size == 0 {
                // No block came to make it.
                File::create(&f.part).map_err(TransferError::io(f.part.display().to_string()))?;
            }
            std::fs::rename(&f.part, &f.path)
                .map_err(TransferError::io(f.path.display().to_string()))?;
            if f.journaled {
                let _ = std::fs::remove_file(&f.journal_path);
            }
            ok_files += 1;
            bytes += f.size;
        } else if failure.is_none() {
            // The blocks were all there and the digest still differs: nothing to
            // resume from.
            let _ = std::fs::remove_file(&f.part);
            let _ = std::fs::remove_file(&f.journal_path);
        }
        // After a failed channel the part file and its journal stay: a new session
        // of the same files resumes from them.
        ctl.send(&Msg::FileDone {
            file: i as u32,
            ok: good,
        })?;
    }
    ctl.send(&Msg::Finished)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if ok_files < files.len() {
        return Err(TransferError::Integrity(format!(
            "{} of {} files failed their checks",
            files.len() - ok_files,
            files.len()
        )));
    }
    Ok(RecvSummary {
        peer,
        files: ok_files,
        bytes,
        refetched,
    })
}
