//! The receiver's data phase: each file checked once its blocks and digest are in,
//! verified files committed in batches (syncfs, renames, syncfs, confirmations).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::super::beneath::DirHandle;
use super::super::control::{ControlWriter, Msg};
use super::super::TransferError;
use super::incoming::{Incoming, PART_MODE};
use crate::clock::Clock;

/// Seconds and nanoseconds since the Unix epoch (before it, for negative seconds)
/// as a time; `None` if out of range.
pub(super) fn system_time((secs, nanos): (i64, u32)) -> Option<std::time::SystemTime> {
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
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// Verified files committed together: one `syncfs`, then their renames.
pub(super) const COMMIT_BATCH: usize = 4096;

/// Batches of at most this many files are made durable file by file, not by
/// `syncfs` ([`Session::commit`]).
pub(super) const FSYNC_FILES: usize = 16;
/// Times a damaged block is fetched again before the session gives up.
pub(super) const MAX_REFETCH: u32 = 3;
/// After a failure, how long the channels may go without news before the
/// receiver stops waiting for them.
pub(super) const DRAIN_QUIET: Duration = Duration::from_secs(3);

/// What the channel and control threads tell the session.
pub(super) enum Event {
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
pub(super) struct Session {
    /// The destination, held open; `None` when nothing is written.
    pub(super) root: Option<Arc<DirHandle>>,
    pub(super) incoming: Arc<Mutex<Vec<Incoming>>>,
    pub(super) writer: ControlWriter,
    pub(super) digests: Vec<Option<[u8; 32]>>,
    /// Checked: failed, or verified (in the batch, or committed).
    pub(super) done: Vec<bool>,
    /// Verified files waiting to be committed.
    pub(super) batch: Vec<usize>,
    pub(super) attempts: HashMap<(u32, u64), u32>,
    pub(super) ok_files: usize,
    pub(super) bytes: u64,
    pub(super) failed_files: usize,
    pub(super) refetched: u64,
    /// Files here whole already that the sender's digest matched.
    pub(super) present: usize,
    /// Files put in place over files here (`--overwrite`).
    pub(super) replaced: usize,
    /// Files here whole already that the sender's digest did not match, as
    /// shown to the user: left as they are.
    pub(super) differ: Vec<String>,
    /// The last `Progress` told: bytes, and when (ns on the clock).
    pub(super) told: (u64, Clock, u64),
}

impl Session {
    /// The data phase: blocks land on the channel threads; this verifies each file
    /// once all its blocks and its digest are in, and commits verified files in
    /// batches (one syncfs, then renames and confirmations), until every file is
    /// done and every channel has ended. Returns what failed, if anything: every
    /// failure ends the phase and reaches the sender. `open_channels` counts down
    /// as channels end (the caller drains the rest after a failure).
    pub(super) fn run(
        &mut self,
        rx: &mpsc::Receiver<Event>,
        stored: &AtomicU64,
        open_channels: &mut usize,
        files: usize,
        block_size: u32,
    ) -> Option<TransferError> {
        let mut undone = files;
        let mut phase = || -> Result<(), TransferError> {
            while undone > 0 || *open_channels > 0 {
                let ev = if self.batch.is_empty() {
                    // No deadline here: a file of a terabyte says nothing until
                    // its last block. A dead sender ends the channels (its closed
                    // port refuses UDT's datagrams; TCP resets) and the control
                    // channel, and that comes as an event.
                    match rx.recv_timeout(PROGRESS_EVERY) {
                        Ok(ev) => ev,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            self.progress(stored);
                            continue;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            return Err(TransferError::Protocol(
                                "every channel ended with files unfinished".into(),
                            ))
                        }
                    }
                } else {
                    match rx.try_recv() {
                        Ok(ev) if self.batch.len() < COMMIT_BATCH => ev,
                        Ok(ev) => {
                            undone -= self.commit()?;
                            ev
                        }
                        Err(_) => {
                            undone -= self.commit()?;
                            continue;
                        }
                    }
                };
                self.progress(stored);
                undone -= self.on_event(ev, open_channels, block_size)?;
            }
            Ok(())
        };
        phase().err()
    }

    /// One event of the data phase; returns how many files finished. A channel's
    /// end counts `open_channels` down.
    fn on_event(
        &mut self,
        ev: Event,
        open_channels: &mut usize,
        block_size: u32,
    ) -> Result<usize, TransferError> {
        match ev {
            Event::Ctl(Ok(Msg::Digest {
                file,
                digest,
                changed,
                replaced,
            })) => {
                let d = hex::decode(&digest)
                    .ok()
                    .and_then(|d| <[u8; 32]>::try_from(d).ok());
                match (self.digests.get_mut(file as usize), d) {
                    (Some(slot @ None), Some(d)) => *slot = Some(d),
                    _ => {
                        return Err(TransferError::Protocol(format!(
                            "a bad digest for file {file}"
                        )))
                    }
                }
                let file = file as usize;
                if replaced && !self.start_replacing(file) {
                    return Err(TransferError::Protocol(format!(
                        "file {file} sent to replace one here, without `--overwrite`"
                    )));
                }
                if self.is_present(file) {
                    return Ok(self.check_present(file));
                }
                // Kept blocks the sender sends again, whose new copies are not
                // here yet: the file waits for them (their `Written`).
                self.forget_kept(file, &changed, block_size);
                // Files already whole from an interrupted session, and empty
                // ones, wait only for this.
                if self.is_whole(file) {
                    return self.check(file);
                }
                Ok(0)
            }
            Event::Ctl(Ok(m)) => Err(TransferError::Protocol(format!("unexpected {m:?}"))),
            Event::Ctl(Err(e)) => Err(e),
            Event::Written(file) => {
                // Whole when it was sent, but maybe not now: the digest may since
                // have said a kept block is coming again (its new copy sends
                // `Written` once more).
                if self.digests[file].is_some() && self.is_whole(file) {
                    return self.check(file);
                }
                Ok(0)
            }
            Event::Corrupt(file, offset, len) => {
                let n = self.attempts.entry((file, offset)).or_insert(0);
                *n += 1;
                if *n > MAX_REFETCH {
                    return Err(TransferError::Integrity(format!(
                        "block {file}@{offset} arrived damaged {MAX_REFETCH} times"
                    )));
                }
                self.writer.send(&Msg::Resend {
                    blocks: vec![(file, offset, len)],
                })?;
                Ok(0)
            }
            Event::ChannelEnded(r) => {
                *open_channels -= 1;
                r.map(|()| 0)
            }
        }
    }

    /// Tells the sender how many bytes are stored, at most every
    /// [`PROGRESS_EVERY`] and only when it moved: its progress shows what is here,
    /// not what its own buffers took.
    pub(super) fn progress(&mut self, stored: &AtomicU64) {
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
    pub(super) fn start_replacing(&self, i: usize) -> bool {
        self.incoming.lock().expect("no panics hold it")[i].start_replacing()
    }

    /// Whether file `i` is here whole already ([`Incoming::present`]).
    pub(super) fn is_present(&self, i: usize) -> bool {
        self.incoming.lock().expect("no panics hold it")[i]
            .present
            .is_some()
    }

    /// The sender's digest of file `i`, here whole already, has come: the digest
    /// read back here, it is the same file and is confirmed as it is; another, it
    /// is another file of that name and size, which stays untouched and fails.
    /// Nothing is written either way. Returns how many files finished (0 or 1).
    pub(super) fn check_present(&mut self, i: usize) -> usize {
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
    pub(super) fn is_whole(&self, i: usize) -> bool {
        let all = self.incoming.lock().expect("no panics hold it");
        all[i].received == all[i].size
    }

    /// The sender's digest of file `i` says the kept blocks at `changed` differ on
    /// its side and are sent again: those not yet replaced stop counting, so the
    /// file is checked only once their new copies are in. (Offsets it did not
    /// keep, or has replaced already, are passed over.)
    pub(super) fn forget_kept(&mut self, i: usize, changed: &[u64], block_size: u32) {
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
    pub(super) fn check(&mut self, i: usize) -> Result<usize, TransferError> {
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
    /// then each is renamed, and the renames are made to last before any is
    /// confirmed, so a file the sender was told is done survives a power cut here.
    /// Returns how many finished.
    ///
    /// A large batch (100 000 small files) takes one `syncfs` before the renames
    /// and one after, rather than an fsync per file. A batch of a few files is
    /// made durable file by file (fdatasync each, then fsync its folder): `syncfs`
    /// also flushes whatever else is dirty on the file system, such as a build's
    /// output or another program's writes, and that took 0.1-4.3 s after a 100 MB
    /// transfer on a machine that was building (`crates/cli/tests/emu.rs`).
    /// Only files directly in the destination go one by one: a folder made for
    /// the session would need its own entry made durable too, which `syncfs`
    /// covers and an fsync of the file's folder does not.
    pub(super) fn commit(&mut self) -> Result<usize, TransferError> {
        let one_by_one = self.batch.len() <= FSYNC_FILES && self.all_in_root(&self.batch);
        if !one_by_one {
            self.sync()?;
        }
        let batch = std::mem::take(&mut self.batch);
        let mut placed = vec![];
        let mut failed = None;
        for i in batch {
            match self.place(i, one_by_one) {
                Ok(()) => placed.push(i),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Files put in place before a failure are confirmed all the same (a new
        // session would find them there and refuse to replace them).
        let synced = if one_by_one {
            self.sync_root(&placed)
        } else {
            self.sync()
        };
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

    /// Whether every one of `files` that is written goes directly into the
    /// destination folder (the one the receiver was given, there before the
    /// session).
    fn all_in_root(&self, files: &[usize]) -> bool {
        let all = self.incoming.lock().expect("no panics hold it");
        files.iter().all(|&i| match (&all[i].place, &self.root) {
            (None, _) => true,
            (Some(p), Some(root)) => Arc::ptr_eq(&p.dir, root),
            (Some(_), None) => false,
        })
    }

    /// Makes the renames of `placed` files last: an fsync of the destination
    /// folder, which holds them all ([`Self::all_in_root`]).
    fn sync_root(&self, placed: &[usize]) -> Result<(), TransferError> {
        match &self.root {
            Some(root) if !placed.is_empty() => root
                .fsync()
                .map_err(TransferError::io(root.shown(".").display().to_string())),
            _ => Ok(()),
        }
    }

    /// Flushes the receiving file system (nothing, when nothing is written).
    pub(super) fn sync(&self) -> Result<(), TransferError> {
        match &self.root {
            None => Ok(()),
            Some(root) => root
                .syncfs()
                .map_err(TransferError::io("syncfs".to_string())),
        }
    }

    /// Renames verified file `i` into place and drops its journal; with `sync`,
    /// its data reaches the disk first (fdatasync).
    pub(super) fn place(&mut self, i: usize, sync: bool) -> Result<(), TransferError> {
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
            if sync {
                file.sync_data().map_err(p.io(&p.part))?;
            }
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
