//! The sending side.

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use longhaul_proto::transfer::{BlockRepr, FileBlocks, HEADER_LEN};
use longhaul_proto::udt::UdtConnConfig;

use super::channel::DataChannel;
use super::control::{hex, unhex, Control, FileEntry, Msg, PROTOCOL_VERSION};
use super::{key, TransferError, END_OF_CHANNEL};
use crate::Impairment;

/// How to send.
#[derive(Debug, Clone)]
pub struct SendOptions {
    /// Files and directories (sent recursively, under their own names).
    pub paths: Vec<PathBuf>,
    /// The receiver's control address.
    pub dest: SocketAddr,
    /// The pre-shared token.
    pub token: String,
    /// Data channels.
    pub channels: u16,
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
    /// Counts the file bytes handed to the channels, for a progress display.
    pub progress: Option<Arc<AtomicU64>>,
    /// Stop after handing this many blocks to the channels, dropping the session
    /// as a crash would (tests of resume).
    pub stop_after_blocks: Option<u64>,
}

/// What a send did.
#[derive(Debug, Clone)]
pub struct SendSummary {
    /// Files sent and confirmed.
    pub files: usize,
    /// Bytes of file data sent.
    pub bytes: u64,
    /// Blocks sent.
    pub blocks: u64,
    /// Blocks sent again because they arrived damaged.
    pub resent: u64,
    /// Blocks not sent because the receiver held them from an interrupted session.
    pub skipped: u64,
}

/// The files under `paths`: (source, name at the receiver, size), sorted by name.
pub fn list_files(paths: &[PathBuf]) -> Result<Vec<(PathBuf, String, u64)>, TransferError> {
    fn walk(
        p: &Path,
        name: String,
        out: &mut Vec<(PathBuf, String, u64)>,
    ) -> Result<(), TransferError> {
        let m = std::fs::symlink_metadata(p).map_err(TransferError::io(p.display().to_string()))?;
        if m.is_dir() {
            for e in std::fs::read_dir(p).map_err(TransferError::io(p.display().to_string()))? {
                let e = e.map_err(TransferError::io(p.display().to_string()))?;
                let child = e.file_name().to_string_lossy().into_owned();
                walk(&e.path(), format!("{name}/{child}"), out)?;
            }
        } else if m.is_file() {
            out.push((p.to_path_buf(), name, m.len()));
        }
        // Symbolic links and special files are not sent.
        Ok(())
    }
    let mut out = vec![];
    for p in paths {
        let name = p
            .canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
            .ok_or_else(|| {
                TransferError::Protocol(format!("{}: no such file or directory", p.display()))
            })?;
        walk(p, name, &mut out)?;
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    if let Some(w) = out.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(TransferError::Protocol(format!(
            "two sources would both be `{}`",
            w[0].1
        )));
    }
    Ok(out)
}

/// The blocks to send, and each file's block hashes as they are computed.
struct Work {
    file: usize,
    blocks: Option<FileBlocks>,
    sizes: Vec<u64>,
    block_size: u32,
    /// Per file, the blocks the receiver holds already (by offset).
    have: Vec<std::collections::HashSet<u64>>,
    /// Blocks handed out to be sent, and the most that may be (a test's crash).
    sent: u64,
    limit: u64,
}

impl Work {
    /// The next block, and whether the receiver holds it already (then it is only
    /// read and hashed, for the file's digest).
    fn next(&mut self) -> Option<(BlockRepr, bool)> {
        loop {
            if let Some(b) = self.blocks.as_mut().and_then(Iterator::next) {
                let held = self
                    .have
                    .get(b.file as usize)
                    .is_some_and(|h| h.contains(&b.offset));
                if !held {
                    if self.sent == self.limit {
                        return None;
                    }
                    self.sent += 1;
                }
                return Some((b, held));
            }
            if self.file >= self.sizes.len() {
                return None;
            }
            self.blocks = Some(FileBlocks::new(
                self.file as u32,
                self.sizes[self.file],
                self.block_size,
            ));
            self.file += 1;
        }
    }
}

/// Sends the files under `opts.paths` to a `longhaul recv` at `opts.dest`.
pub fn send(opts: &SendOptions) -> Result<SendSummary, TransferError> {
    let files = list_files(&opts.paths)?;
    let tcp = TcpStream::connect_timeout(&opts.dest, opts.timeout)
        .map_err(TransferError::io(format!("connecting to {}", opts.dest)))?;
    tcp.set_read_timeout(Some(opts.timeout.max(Duration::from_secs(600))))
        .map_err(TransferError::io("control channel"))?;
    let mut ctl = Control::new(tcp)?;
    ctl.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
    })?;
    let nonce = match ctl.recv()? {
        Msg::Challenge { nonce } => {
            unhex(&nonce).ok_or_else(|| TransferError::Protocol("bad nonce".into()))?
        }
        Msg::Reject { reason } => {
            return Err(TransferError::Protocol(format!(
                "the receiver refused: {reason}"
            )))
        }
        m => {
            return Err(TransferError::Protocol(format!(
                "expected a challenge, got {m:?}"
            )))
        }
    };
    let mac = blake3::keyed_hash(&key(&opts.token), &nonce);
    ctl.send(&Msg::Auth {
        mac: hex(mac.as_bytes()),
    })?;
    ctl.send(&Msg::Offer {
        files: files
            .iter()
            .map(|(_, path, size)| FileEntry {
                path: path.clone(),
                size: *size,
            })
            .collect(),
        channels: opts.channels,
        block_size: opts.block_size,
        transport: opts.transport,
    })?;
    let (ports, have) = match ctl.recv()? {
        Msg::Accept { ports, have } if ports.len() == usize::from(opts.channels) => (ports, have),
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
    let sizes: Vec<u64> = files.iter().map(|f| f.2).collect();
    let work = Arc::new(Mutex::new(Work {
        file: 0,
        blocks: None,
        sizes: sizes.clone(),
        block_size: opts.block_size,
        have: (0..files.len())
            .map(|i| {
                have.get(i)
                    .map_or_else(Default::default, |h| h.iter().copied().collect())
            })
            .collect(),
        sent: 0,
        limit: opts.stop_after_blocks.unwrap_or(u64::MAX),
    }));
    // Block hashes per file, by block number: the file digest hashes them in order.
    let hashes: Arc<Mutex<Vec<Vec<[u8; 32]>>>> = Arc::new(Mutex::new(
        sizes
            .iter()
            .map(|&s| vec![[0u8; 32]; s.div_ceil(u64::from(opts.block_size)) as usize])
            .collect(),
    ));
    let sources: Arc<Vec<PathBuf>> = Arc::new(files.iter().map(|f| f.0.clone()).collect());
    let mut threads = vec![];
    for (c, port) in ports.into_iter().enumerate() {
        let addr = SocketAddr::new(opts.dest.ip(), port);
        let cfg = UdtConnConfig {
            socket_id: 1 + c as u32,
            isn: (c as u32).wrapping_mul(104_729) & 0x3fff_ffff,
            ..opts.udt
        };
        let (work, hashes, sources) = (work.clone(), hashes.clone(), sources.clone());
        let (timeout, block_size, impair) = (opts.timeout, opts.block_size, opts.impair);
        let transport = opts.transport;
        let progress = opts.progress.clone();
        threads.push(thread::spawn(
            move || -> Result<(u64, u64, u64), TransferError> {
                let mut s = DataChannel::connect(transport, addr, cfg, timeout)?;
                if let (Some(i), Some(u)) = (impair, s.udt()) {
                    u.impair(Impairment {
                        seed: i.seed ^ c as u64,
                        ..i
                    });
                }
                // Blocks are handed out in file order, so a channel keeps only the
                // file it is reading open: a tree of 100 000 files must not hold
                // 100 000 descriptors.
                let mut open: Option<(u32, File)> = None;
                let mut buf = vec![0u8; HEADER_LEN + block_size as usize + 32];
                let (mut bytes, mut blocks, mut skipped) = (0, 0, 0);
                loop {
                    let Some((b, held)) = work.lock().expect("no panics hold it").next() else {
                        break;
                    };
                    if open.as_ref().is_none_or(|(i, _)| *i != b.file) {
                        let p = &sources[b.file as usize];
                        let f =
                            File::open(p).map_err(TransferError::io(p.display().to_string()))?;
                        open = Some((b.file, f));
                    }
                    let f = &open.as_ref().expect("opened above").1;
                    let n = b.len as usize;
                    b.emit(&mut buf[..HEADER_LEN]);
                    let data = &mut buf[HEADER_LEN..HEADER_LEN + n];
                    f.read_exact_at(data, b.offset)
                        .map_err(TransferError::io(format!(
                            "{}: reading (did it shrink?)",
                            sources[b.file as usize].display()
                        )))?;
                    let h = *blake3::hash(data).as_bytes();
                    buf[HEADER_LEN + n..HEADER_LEN + n + 32].copy_from_slice(&h);
                    hashes.lock().expect("no panics hold it")[b.file as usize]
                        [(b.offset / u64::from(block_size)) as usize] = h;
                    if held {
                        skipped += 1;
                        continue;
                    }
                    s.write_all(&buf[..HEADER_LEN + n + 32])?;
                    bytes += u64::from(b.len);
                    if let Some(p) = &progress {
                        p.fetch_add(u64::from(b.len), Ordering::Relaxed);
                    }
                    blocks += 1;
                }
                s.write_all(&END_OF_CHANNEL)?;
                s.finish(timeout.max(Duration::from_secs(60)))?;
                Ok((bytes, blocks, skipped))
            },
        ));
    }
    let (mut bytes, mut blocks, mut skipped) = (0, 0, 0);
    let mut failure = None;
    for t in threads {
        match t.join().expect("channel thread") {
            Ok((b, n, k)) => {
                bytes += b;
                blocks += n;
                skipped += k;
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if opts.stop_after_blocks.is_some_and(|l| blocks >= l) {
        // A test's crash: leave without the digests; the receiver keeps what came.
        return Err(TransferError::Protocol(format!(
            "stopped after {blocks} blocks, as asked"
        )));
    }
    let hashes = hashes.lock().expect("no panics hold it");
    for (i, hs) in hashes.iter().enumerate() {
        let mut d = blake3::Hasher::new();
        for h in hs {
            d.update(h);
        }
        ctl.send(&Msg::Digest {
            file: i as u32,
            digest: hex(d.finalize().as_bytes()),
        })?;
    }
    let mut bad = vec![];
    let mut resent = 0;
    loop {
        match ctl.recv()? {
            Msg::FileDone { file, ok } => {
                if !ok {
                    bad.push(files.get(file as usize).map_or("?".into(), |f| f.1.clone()));
                }
            }
            Msg::Resend { blocks } => {
                for (file, offset, len) in blocks {
                    let src = files
                        .get(file as usize)
                        .filter(|f| offset + u64::from(len) <= f.2 && len <= opts.block_size)
                        .ok_or_else(|| {
                            TransferError::Protocol(format!(
                                "asked again for block {file}@{offset}, which was never sent"
                            ))
                        })?;
                    let mut data = vec![0u8; len as usize];
                    File::open(&src.0)
                        .and_then(|f| f.read_exact_at(&mut data, offset))
                        .map_err(TransferError::io(src.0.display().to_string()))?;
                    ctl.send(&Msg::Block { file, offset, len })?;
                    ctl.send_raw(&data)?;
                    ctl.send_raw(blake3::hash(&data).as_bytes())?;
                    resent += 1;
                }
            }
            Msg::Finished => break,
            m => return Err(TransferError::Protocol(format!("unexpected {m:?}"))),
        }
    }
    if !bad.is_empty() {
        return Err(TransferError::Integrity(format!(
            "the receiver could not verify: {}",
            bad.join(", ")
        )));
    }
    Ok(SendSummary {
        files: files.len(),
        bytes,
        blocks,
        resent,
        skipped,
    })
}
