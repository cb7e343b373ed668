//! What the receiver reads back before it answers an offer: the files it holds
//! whole, hashed as the sender hashes its own, and the blocks interrupted sessions
//! kept, checked again; and telling the waiting sender how far it got.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::super::control::{Control, Msg};
use super::super::TransferError;
use super::incoming::{Place, Sink};
use crate::clock::Clock;

/// The journaled blocks of a part file that still match their hashes: each is read
/// back and hashed, so a resume never trusts bytes a crash (or a power cut before
/// the page cache reached the disk) may have lost. Costs one read of what is kept.
pub(super) fn verify_kept(
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

/// The digest of a file here whole already ([`super::incoming::Incoming::present`]), computed as
/// the sender computes its own: BLAKE3 over its blocks' hashes in order.
pub(super) fn digest_present(
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
pub(super) fn digest_all_present(
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
pub(super) const READ_BACK_THREADS: usize = 8;
/// The most the readers' block buffers may take together: 8 readers of 4 MiB
/// blocks (the default), 1 of 64 MiB blocks or more.
pub(super) const READ_BACK_MEMORY: u64 = 64 << 20;

/// Reads the blocks of `file` (`shown` in errors) at `offsets` and hands each one's
/// BLAKE3 hash to `each`, and the bytes read to `count`.
pub(super) fn hash_blocks(
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
pub(super) const CHECKING_EVERY: Duration = Duration::from_secs(1);

/// What the receiver reads back before it answers an offer, told to the sender
/// about every [`CHECKING_EVERY`] (`Msg::Checking`): a sender waiting for `Accept`
/// while terabytes are read would otherwise take the silence for a dead peer.
pub(super) struct ReadBack<'a> {
    pub(super) ctl: &'a mut Control,
    pub(super) total: u64,
    pub(super) done: u64,
    pub(super) clock: Clock,
    /// When the last message went, ns on `clock`.
    pub(super) told: u64,
    /// How often to tell ([`CHECKING_EVERY`] unless a test says otherwise).
    pub(super) every: Duration,
}

impl<'a> ReadBack<'a> {
    pub(super) fn new(ctl: &'a mut Control, total: u64, every: Duration) -> Self {
        ReadBack {
            ctl,
            total,
            done: 0,
            clock: Clock::new(),
            told: 0,
            every,
        }
    }

    /// `n` more bytes read back.
    pub(super) fn add(&mut self, n: u64) -> Result<(), TransferError> {
        self.done += n;
        let now = self.clock.now().as_nanos();
        if now - self.told >= self.every.as_nanos() as u64 {
            self.told = now;
            self.ctl.send(&Msg::Checking {
                bytes: self.done,
                total: self.total,
            })?;
        }
        Ok(())
    }
}
