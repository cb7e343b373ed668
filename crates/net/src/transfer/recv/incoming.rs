//! A file being received: where it goes (a folder handle and its names there),
//! its blocks so far, and how a checked block is stored and journaled.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use longhaul_proto::transfer::BlockRepr;
use rustix::fs::OFlags;

use super::super::beneath::DirHandle;

use super::super::{journal_name, part_name, TransferError};
use super::pieces::Assembly;
use super::session::Event;

/// Where a received file goes: its folder, held open ([`DirHandle`]), and its
/// names there. Every operation on the file goes through the handle.
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub(super) dir: Arc<DirHandle>,
    pub(super) name: String,
    /// The part file's name ([`super::super::WORKING_SUFFIXES`]).
    pub(super) part: String,
    /// The journal's name: blocks written and checked, one line each, so that a
    /// new session can resume.
    pub(super) journal: String,
}

impl Place {
    pub(super) fn new(dir: Arc<DirHandle>, name: &str) -> Self {
        Place {
            part: part_name(name),
            journal: journal_name(name),
            name: name.to_string(),
            dir,
        }
    }

    pub(super) fn io(&self, name: &str) -> impl FnOnce(std::io::Error) -> TransferError {
        TransferError::io(self.dir.shown(name).display().to_string())
    }
}

/// One file being received.
pub(super) struct Incoming {
    /// Where it goes; `None` when nothing is written ([`super::RecvOptions::discard`]).
    pub(super) place: Option<Place>,
    /// Its name, as shown to the user.
    pub(super) shown: String,
    /// Whether the file has a journal: only files of more than one block. A file of
    /// one block is all or nothing, so a journal would save nothing and cost two
    /// file creations and a deletion per small file.
    pub(super) journaled: bool,
    /// The part file and the journal, open only while blocks of the file arrive
    /// (closed once it is complete, so many small files do not exhaust descriptors).
    /// The part file is shared: channels write their blocks of it at the same time,
    /// each without the session's lock (see [`store`]).
    pub(super) open: Option<(Arc<File>, Option<File>)>,
    pub(super) size: u64,
    pub(super) received: u64,
    /// Block hashes by offset.
    pub(super) hashes: BTreeMap<u64, [u8; 32]>,
    /// Offsets of blocks kept from an interrupted session (in `hashes`) that the
    /// sender may still replace: its copy differs (the file changed since). While a
    /// replacement is being written the file is not whole, so it is not checked.
    pub(super) kept: HashSet<u64>,
    /// Blocks that arrived damaged and were stored when sent again.
    pub(super) refetched: u64,
    /// Blocks arriving in pieces, by offset ([`super::pieces`]).
    pub(super) assembling: BTreeMap<u64, Assembly>,
    /// Checked and dropped, not written ([`super::RecvOptions::discard`]).
    pub(super) discard: bool,
    /// Permission bits the file gets when it is put in place ([`final_mode`]).
    pub(super) mode: u32,
    /// The sender's modification time, which the file gets when it is put in
    /// place: seconds and nanoseconds since the Unix epoch.
    pub(super) mtime: Option<(i64, u32)>,
    /// Here whole already, of the size offered (`Accept.present`): its digest,
    /// read back from the file itself. None of its blocks may arrive; the
    /// sender's digest alone decides: the same file, or another that is left as
    /// it is, or replaced whole ([`Incoming::start_replacing`]).
    pub(super) present: Option<[u8; 32]>,
    /// Whether a file held whole may be replaced (`recv --overwrite`).
    pub(super) replace: bool,
    /// Put in place over a file here (`--overwrite`): one of another size, or
    /// one held whole whose blocks come after all.
    pub(super) replacing: bool,
}

/// Permission bits of a part file: its owner's only, whatever the file's own will
/// be, so a partial copy of a private file is never readable by others, and the
/// receiver can always write it.
pub(super) const PART_MODE: u32 = 0o600;

/// The permission bits a received file gets: the sender's (or, if it gave none,
/// a new file's `0o666`) less this process's umask, as `cp` and `scp` give a new
/// file, without setuid, setgid or sticky bits.
pub(super) fn final_mode(offered: Option<u32>) -> u32 {
    offered.unwrap_or(0o666) & 0o777 & !umask()
}

/// This process's umask, read from `/proc/self/status` (`umask(2)` can only read
/// it by setting it, which races with other threads); `0o022` if unreadable.
pub(super) fn umask() -> u32 {
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
    /// A file of `size` bytes received with nothing written (`discard`), for tests.
    #[cfg(test)]
    pub(super) fn discarded(size: u64) -> Self {
        Incoming {
            place: None,
            shown: String::new(),
            journaled: false,
            open: None,
            size,
            mode: 0o644,
            received: 0,
            hashes: BTreeMap::new(),
            kept: HashSet::new(),
            assembling: BTreeMap::new(),
            refetched: 0,
            discard: true,
            mtime: None,
            present: None,
            replace: false,
            replacing: false,
        }
    }

    /// A file held whole that differs at the sender, which sends it whole to
    /// replace it (`recv --overwrite`): from now on it is received like any file,
    /// into its part file, and put in place over the one here. Called by its
    /// first block or its digest, whichever comes first (they travel on different
    /// connections). False if it may not be replaced.
    pub(super) fn start_replacing(&mut self) -> bool {
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
    pub(super) fn part_file(&mut self) -> Result<Arc<File>, TransferError> {
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
    pub(super) fn note_written(
        &mut self,
        offset: u64,
        len: u64,
        hash: &[u8],
    ) -> Result<(), TransferError> {
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
pub(super) fn read_journal(
    p: &Place,
    size: u64,
    block_size: u32,
) -> Option<BTreeMap<u64, [u8; 32]>> {
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
            hex::decode(h)
                .ok()
                .and_then(|h| <[u8; 32]>::try_from(h).ok()),
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
pub(super) fn journal_line(offset: u64, hash: &[u8]) -> String {
    format!("{offset} {}\n", hex::encode(hash))
}

/// How blocks are checked, and how many bytes are stored so far.
pub(super) struct Sink {
    pub(super) block_size: u32,
    /// Blocks' hashes are BLAKE3 keyed with it ([`crate::secure::block_key`]).
    pub(super) block_key: [u8; 32],
    /// File bytes written (or checked, when discarding) so far, for `Progress`.
    pub(super) stored: AtomicU64,
    /// [`Hooks::pause_before_write`](super::Hooks).
    pub(super) pause_before_write: std::time::Duration,
    /// The most blocks gathered from pieces at once, in all files (the session's
    /// channels).
    pub(super) max_assemblies: usize,
}

/// How a block came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arrival {
    /// Whole, on a data channel.
    Sent,
    /// Sent again on the control channel, after it arrived damaged.
    Resent,
    /// In pieces, now all in ([`super::pieces`]).
    Assembled,
}

/// Stores a checked block of file `file` (or notes it damaged) and tells the
/// session when the file is complete.
///
/// The data is written without the session's lock: a channel's write, a large
/// `pwrite` at disk speed, would otherwise hold up every other channel's blocks.
/// The lock is taken only to claim the block (so a second copy is a duplicate even
/// while the first is being written) and to journal and count it once written.
///
/// A block that was sent again, or gathered from pieces, may find its block
/// stored already (a damaged piece asks for the whole block, and either may
/// come first): it is passed over. Any other block that arrives twice is a
/// sender's error.
pub(super) fn store(
    incoming: &Mutex<Vec<Incoming>>,
    events: &mpsc::Sender<Event>,
    sink: &Sink,
    b: BlockRepr,
    data: &[u8],
    trailer: &[u8],
    arrival: Arrival,
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
            if arrival != Arrival::Sent {
                return Ok(()); // asked for twice, and the first copy was good
            }
            return Err(TransferError::Protocol(format!(
                "block {b:?} arrived twice"
            )));
        }
        f.hashes.insert(b.offset, hash);
        // Its pieces, if any were gathered, are not needed now.
        f.assembling.remove(&b.offset);
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
    if !sink.pause_before_write.is_zero() {
        std::thread::sleep(sink.pause_before_write); // a test's race window
    }
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
    f.refetched += u64::from(arrival == Arrival::Resent);
    sink.stored.fetch_add(u64::from(b.len), Ordering::Relaxed);
    if f.received == f.size {
        let _ = events.send(Event::Written(b.file as usize));
    }
    Ok(())
}
