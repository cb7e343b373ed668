//! An offer, checked and prepared: limits, names, the folders made, what is held
//! read back, each file's part file and journal ready, the data ports bound.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rustix::fs::OFlags;

use super::super::beneath::{DirHandle, Entry};
use super::super::channel::{Listener, Transport};
use super::super::control::Control;
use super::super::{
    name_clash, new_journal_name, safe_join, safe_join_dir, NameClash, TransferError,
};
use super::incoming::{final_mode, journal_line, read_journal, Incoming, Place, Sink, PART_MODE};
use super::readback::{digest_all_present, verify_kept, ReadBack};
use super::{bind_data_ports, RecvOptions, MAX_BLOCK, MAX_CHANNELS};

/// What an accepted offer sets up: the data ports, the destination's handle, each
/// file's state, and what the receiver holds already (for `Accept`).
pub(super) struct Prepared {
    pub(super) listeners: Vec<Listener>,
    pub(super) root: Option<Arc<DirHandle>>,
    pub(super) incoming: Vec<Incoming>,
    pub(super) have: Vec<Vec<(u64, String)>>,
    pub(super) present_files: Vec<(u32, String)>,
    pub(super) sink: Arc<Sink>,
}

/// Checks an offer against the limits, the names against each other and against
/// what is here, then makes the folders, reads back what is held and prepares
/// every file: anything refused says why, before anything is written that a
/// refusal would leave behind.
pub(super) fn prepare(
    ctl: &mut Control,
    opts: &RecvOptions,
    offer: &Offer,
    block_key: [u8; 32],
) -> Result<Prepared, TransferError> {
    let Offer {
        files,
        dirs,
        channels,
        block_size,
        transport,
    } = offer;
    let (channels, block_size, transport) = (*channels, *block_size, *transport);
    if !(1..=MAX_CHANNELS).contains(&channels) || !(1..=MAX_BLOCK).contains(&block_size) {
        let e = TransferError::Protocol(format!(
            "asked for {channels} channels and {block_size}-byte blocks; at most {MAX_CHANNELS} and {MAX_BLOCK}"
        ));
        return Err(e);
    }
    let need = super::super::session_memory(channels, block_size, transport, &opts.udt);
    if need > opts.memory_cap {
        let e = TransferError::Protocol(format!(
            "{channels} channels of {block_size}-byte blocks would need {} MiB of buffers here; at most {} MiB (fewer channels or smaller blocks)",
            need >> 20,
            opts.memory_cap >> 20
        ));
        return Err(e);
    }
    let listeners = bind_data_ports(opts, transport, channels)?;
    // Check every name before anything is written: against each other, then each
    // against what the receiver holds.
    let file_names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let dir_names: Vec<&str> = dirs.iter().map(|d| d.path.as_str()).collect();
    if let Some(clash) = name_clash(&file_names, &dir_names) {
        let why = match clash {
            NameClash::Twice(n) => format!("`{}` is offered twice", n.escape_debug()),
            NameClash::FileAndFolder(n) => {
                format!(
                    "`{}` is offered as a file and as a folder",
                    n.escape_debug()
                )
            }
            NameClash::InsideFile { name, file } => {
                format!(
                    "`{}` is offered inside `{}`, which is also offered as a file",
                    name.escape_debug(),
                    file.escape_debug()
                )
            }
        };
        return Err(TransferError::Protocol(why));
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
                return Err(e);
            }
        }
    };
    let mut targets = vec![];
    for f in files {
        safe_join(&opts.dir, &f.path)?;
        targets.push(f);
    }
    for d in dirs {
        safe_join_dir(&opts.dir, &d.path)?;
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
        for d in dirs {
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
                // The destination itself, held already (and known as such when
                // its files are committed: `Session::commit`).
                _ if parent.is_empty() => Arc::clone(root),
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
    let (targets, plans) = prepared?;
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
        return Err(e);
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
        pause_before_write: opts.hooks.pause_before_write,
        max_assemblies: usize::from(channels),
    });
    let prepared = (|| -> Result<_, TransferError> {
        let mut read_back = ReadBack::new(&mut *ctl, total, opts.hooks.checking_every);
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
                present_files.push((i as u32, hex::encode(digest)));
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
                    assembling: BTreeMap::new(),
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
            have.push(
                hashes
                    .iter()
                    .map(|(&o, h)| (o, hex::encode(h)))
                    .collect::<Vec<_>>(),
            );
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
                assembling: BTreeMap::new(),
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
    let (incoming, have, present_files) = prepared?;
    Ok(Prepared {
        listeners,
        root,
        incoming,
        have,
        present_files,
        sink,
    })
}

/// What a sender offers.
pub(super) struct Offer {
    pub(super) files: Vec<super::super::FileEntry>,
    pub(super) dirs: Vec<super::super::DirEntry>,
    pub(super) channels: u16,
    pub(super) block_size: u32,
    pub(super) transport: Transport,
}
