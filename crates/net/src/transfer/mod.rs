//! `longhaul send` / `longhaul recv`: files over parallel UDT channels (or TCP
//! streams), with a TCP control channel that authenticates the sender.
//!
//! ```text
//!  sender                                   receiver (listens on TCP)
//!   |-- Hello{version 5} ---------------------->|
//!   |<------------------------ Challenge{nonce} |
//!   |-- Auth{mac = BLAKE3_k(nonce)} ----------->|   k = BLAKE3(token): the token
//!   |-- Offer{files, folders, channels, ...} -->|   never crosses the network
//!   |<----------- Checking{bytes, total} ...    |   while it reads back what it holds
//!   |<-- Accept{ports, blocks held + hashes,    |
//!   |           files held whole} / Reject      |
//!   |== N channels: [ticket] then [header][data][BLAKE3(data)] ... [end] ==>|
//!   |-- Digest{file, held blocks re-sent} ----->|   once its blocks are out
//!   |<----------- Resend{block} (hash failed)   |
//!   |-- Block{file, offset} + bytes ----------->|
//!   |<---------------- FileDone{file, ok} ...   |   as each file is verified and
//!   |<--------------------------------- Finished|   renamed into place
//!   |<------------------ or Reject{why}, closes |   if the session fails
//! ```
//!
//! Each data channel opens with its ticket, `BLAKE3_k(label, nonce, channel)`
//! (`channel_ticket`): the receiver closes a connection that does not present it,
//! unread, and waits on for one that does, so no block reaches a file from anyone
//! but the authenticated sender of this session, and a port scanner or a stranger
//! that finds a data port cannot end the session either.
//!
//! A file's digest is BLAKE3 over its blocks' BLAKE3 hashes in order, computed by
//! both sides while the blocks pass (no second read). The receiver writes each
//! block at its offset in a temporary file (`.NAME.longhaul-part`); once a file has
//! all its blocks and its digest matches, it joins a commit batch: one `syncfs`,
//! the batch's renames, a second `syncfs` (so a confirmed file survives a power
//! cut), then the `FileDone`s. A block that fails its hash on arrival
//! is asked for again at once (`Resend`) and comes back on the control channel, up
//! to three times. A receiver whose session fails after `Accept` says why (`Reject`)
//! and closes the control channel, so the sender stops at once with that reason.
//!
//! Parallelism, concurrency, pipelining (the knobs of GridFTP and mdtmFTP): the
//! session opens `channels × concurrency` channels in `concurrency` groups; each
//! group works on one file at a time, striped over its `channels` channels, and
//! takes the next file from the offer's list when it has handed out the last block
//! of its current one. With pipelining (the default) it does so at once, so files
//! follow each other without a round trip and 100 000 small files take 6-7 s on
//! loopback; without, it first waits for the receiver's `FileDone` of the file
//! before (one round trip per file). `--block-log` records every block handed
//! out and every verdict. Each side keeps only the files it works on open.
//!
//! Resume: the receiver appends every checked block to `.NAME.longhaul-journal`
//! (files of more than one block; a one-block file is all or nothing), one whole
//! line per write after the block's data. After an interrupted session (kill -9 of
//! either side, a cut network) the part file and the journal stay; when the
//! receiver is alive it first writes and journals every block already in its
//! buffers. The next session of the same file and block size re-reads and re-hashes
//! every journaled block (so a power cut that kept a line but lost its data costs a
//! re-send, not a wrong file, and no fsync per block is needed), rewrites the
//! journal with those that check out, and tells the sender (`Accept.have`, with
//! their hashes), which reads and hashes them for the digest but does not send
//! them, unless its block differs (the file changed since): then it sends it, and
//! its digest names it (`Digest.changed`), so the receiver checks the file with the
//! new copy, not the kept one. Blocks sent twice are those in flight at the
//! interruption: measured 4 to 15 of 2 × 26 possible in the kill -9 test.
//!
//! Files already there: a file the receiver holds under an offered name, of the
//! size offered (confirmed by an earlier session, or copied some other way), is
//! read back and hashed like a journaled part, and named in the answer with its
//! digest (`Accept.present`: one digest per file, so the answer grows with the
//! files offered, not with the bytes held). The sender reads and hashes its own
//! copy and sends none of it: the digests decide. The same file is confirmed as it
//! is. Another file of that name and size is left as it is, and both ends report
//! it; or, if the receiver was started with `--overwrite` (`Accept.replace`), the
//! sender reads it again and sends it whole, its digest marked `replaced`, and the
//! receiver takes it like any file, into a part file renamed over its copy. (The
//! digest and the first block travel on different connections: whichever comes
//! first turns the held file into one being received.) So a tree sent again after
//! an interruption, or to bring a copy up to date, sends only what the receiver
//! lacks. The comparison is by content, not size and modification time (rsync's
//! quick check): a copy made some other way need not carry the times, and an edit
//! can keep them. It costs a read of the file on each side. A file there of
//! another size, or anything else in the way, refuses the session unless the
//! receiver was started with `--overwrite`, which replaces it. The receiver reads
//! back up to eight files at a time, and tells the waiting sender how far it got
//! about once a second (`Checking`).

mod beneath;
mod channel;
mod control;
mod raw;
mod recv;
mod send;

pub use raw::RawSender;

pub use channel::Transport;
pub use control::{DirEntry, FileEntry, Msg, PROTOCOL_VERSION};
pub use recv::{
    receive, Log, RecvOptions, RecvSummary, Server, MAX_PENDING, MAX_PER_SOURCE, PRE_AUTH_DEADLINE,
};
pub use send::{
    list_files, send, synthetic_fill, ListedDir, ListedFile, Listing, SendOptions, SendSummary,
    Skip,
};

use std::path::{Component, Path, PathBuf};

/// What can go wrong in a transfer.
///
/// Each message includes its cause, so none is also given as a `source()`: a
/// report that prints the chain (`anyhow`'s `{:#}`) would say it twice.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A socket or file failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// A UDT channel failed.
    #[error("data channel: {0}")]
    Channel(crate::NetError),
    /// The peer broke the protocol, or refused.
    #[error("{0}")]
    Protocol(String),
    /// The paths given to send cannot be sent as they are (the message names them).
    #[error("{0}")]
    Source(String),
    /// The peer could not prove it knows the token, or the ends disagree on
    /// the protocol or on encryption (the message says which).
    #[error("{0}")]
    Handshake(crate::secure::HandshakeError),
    /// The receiver failed during the data phase and said why.
    #[error("the receiver gave up: {0}")]
    ReceiverGaveUp(String),
    /// The token given is too weak (the message says how to make one).
    #[error("{0}")]
    WeakToken(String),
    /// A file name the receiver will not write (shown escaped: a sender may put
    /// control characters in a name, and they must not reach a terminal).
    #[error("refusing `{}`: {why}", path.escape_debug())]
    UnsafePath {
        /// The name as offered.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// A block or file failed its check.
    #[error("{0}")]
    Integrity(String),
    /// Another session is receiving into the directory.
    #[error(
        "{0}: another `longhaul recv` is receiving into it (one session per directory: \
         their partial files and journals would mix); wait for it to end, or receive elsewhere"
    )]
    DirInUse(String),
}

impl From<crate::NetError> for TransferError {
    fn from(e: crate::NetError) -> Self {
        TransferError::Channel(e)
    }
}

impl From<crate::secure::HandshakeError> for TransferError {
    fn from(e: crate::secure::HandshakeError) -> Self {
        TransferError::Handshake(e)
    }
}

impl TransferError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransferError {
        let what = what.into();
        move |error| TransferError::Io { what, error }
    }
}

/// Written after a channel's last block: a header no block can have (its offset
/// and length overflow), so the receiver knows the channel is done without waiting
/// for the transport's shutdown, which UDT sends once and may lose.
pub(crate) const END_OF_CHANNEL: [u8; longhaul_proto::transfer::HEADER_LEN] =
    [0xff; longhaul_proto::transfer::HEADER_LEN];

/// Written before a piece of a block (the sender splits a file's last blocks
/// over its channels: `send/sched.rs`), again a header no block can have. The
/// header after it gives the piece's file, offset and length, within one block;
/// its trailer is the piece's own keyed hash.
pub(crate) const PIECE_FOLLOWS: [u8; longhaul_proto::transfer::HEADER_LEN] = {
    let mut h = [0xff; longhaul_proto::transfer::HEADER_LEN];
    h[longhaul_proto::transfer::HEADER_LEN - 1] = 0xfe;
    h
};

/// The most buffer memory one side of a session may take (the issue's default
/// cap): per channel a block buffer and the transport's buffer.
pub const MEMORY_CAP: u64 = 512 << 20;

/// Buffer memory a session of `channels` channels and `block_size`-byte blocks
/// takes on one side: two blocks (and their hashes) per channel, one it reads or
/// writes and one a receiver may gather from pieces (a file's last blocks come
/// split over the channels, one block per channel at most), and per UDT channel
/// its packet buffer (the larger of send and receive; TCP's lives in the kernel)
/// and one block more: a sender's packet buffer holds slices of the blocks it
/// sends, and a block stays whole while any of its packets is unacknowledged.
pub fn session_memory(
    channels: u16,
    block_size: u32,
    transport: Transport,
    udt: &longhaul_proto::udt::UdtConnConfig,
) -> u64 {
    let block = u64::from(block_size) + 32;
    let transport_buffer = match transport {
        Transport::Udt => {
            u64::from(udt.rcv_buf_pkts.max(udt.snd_buf_pkts)) * u64::from(udt.mss) + block
        }
        Transport::Tcp => 0,
    };
    u64::from(channels) * (2 * block + transport_buffer)
}

/// What the receiver calls its working files beside a file `NAME` it receives:
/// `.NAME` and one of these (the blocks so far; the journal of checked blocks; the
/// journal's replacement while it is rewritten).
const WORKING_SUFFIXES: [&str; 3] = [
    ".longhaul-part",
    ".longhaul-journal",
    ".longhaul-journal.new",
];

/// The part file of a file named `name`: its blocks until it is complete and
/// checked. (Each working name fits NAME_MAX: [`beneath::working_name`].)
pub(crate) fn part_name(name: &str) -> String {
    beneath::working_name(name, WORKING_SUFFIXES[0])
}

/// The journal of a file named `name`: the blocks its part file holds, checked.
pub(crate) fn journal_name(name: &str) -> String {
    beneath::working_name(name, WORKING_SUFFIXES[1])
}

/// The journal of a file named `name` while it is rewritten.
pub(crate) fn new_journal_name(name: &str) -> String {
    beneath::working_name(name, WORKING_SUFFIXES[2])
}

/// Whether a file name (the last part of a path) has the form of a receiver's
/// working file. Such a file is never received: written as a file, it could be
/// another file's part file, and one would overwrite the other. (It is most likely
/// left over from an interrupted session in a tree now being sent on.)
pub fn is_working_file(file_name: &str) -> bool {
    file_name.starts_with('.') && WORKING_SUFFIXES.iter().any(|s| file_name.ends_with(s))
}

/// Why offered names cannot all be written, whatever the receiver holds already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameClash<'a> {
    /// Two files of this name.
    Twice(&'a str),
    /// A file and a folder of this name.
    FileAndFolder(&'a str),
    /// `name` (a file's or a folder's) lies inside `file`, which is a file.
    InsideFile {
        /// The name inside.
        name: &'a str,
        /// The file it would need as a folder.
        file: &'a str,
    },
}

/// The first clash among the `/`-separated names of `files` and `dirs`, if any.
/// The sender checks its listing with it before connecting (to name the paths),
/// and the receiver checks every offer with it (a sender may be anyone).
pub(crate) fn name_clash<'a>(files: &[&'a str], dirs: &[&'a str]) -> Option<NameClash<'a>> {
    let mut file_names = std::collections::HashSet::with_capacity(files.len());
    if let Some(&twice) = files.iter().find(|&&f| !file_names.insert(f)) {
        return Some(NameClash::Twice(twice));
    }
    if let Some(&both) = dirs.iter().find(|d| file_names.contains(*d)) {
        return Some(NameClash::FileAndFolder(both));
    }
    files.iter().chain(dirs).find_map(|&name| {
        name.match_indices('/')
            .map(|(i, _)| &name[..i])
            .find(|folder| file_names.contains(folder))
            .map(|file| NameClash::InsideFile { name, file })
    })
}

/// A relative name offered by a sender, checked and joined under `root`: no
/// absolute paths, no `..`, no empty or `.` parts, no component that is a symlink
/// on the receiver's side (which could lead out of `root`) or a file there (a
/// folder cannot be made in its place), not a folder in the receiver's way, and not
/// a name of the receiver's working files ([`is_working_file`]).
pub fn safe_join(root: &Path, name: &str) -> Result<PathBuf, TransferError> {
    join_checked(root, name, false)
}

/// [`safe_join`] for a folder offered: the same checks, except that the last
/// component may be a folder on the receiver already (it is kept), and may not be
/// a file there.
pub fn safe_join_dir(root: &Path, name: &str) -> Result<PathBuf, TransferError> {
    join_checked(root, name, true)
}

fn join_checked(root: &Path, name: &str, dir: bool) -> Result<PathBuf, TransferError> {
    let bad = |why| TransferError::UnsafePath {
        path: name.to_string(),
        why,
    };
    if name.is_empty() || name.contains('\0') || name.contains('\\') {
        return Err(bad("empty, or contains NUL or a backslash"));
    }
    // On the string, not `Path::components`, which quietly drops inner `.`s.
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad("has an empty, `.` or `..` component, or is absolute"));
    }
    if name.rsplit('/').next().is_some_and(is_working_file) {
        return Err(bad(
            "has the form of the receiver's own partial files (.NAME.longhaul-part, \
             .NAME.longhaul-journal): left over from an interrupted session?",
        ));
    }
    let rel = Path::new(name);
    let mut out = root.to_path_buf();
    let last = rel.components().count();
    for (i, c) in rel.components().enumerate() {
        match c {
            Component::Normal(p) => {
                out.push(p);
                if let Ok(m) = std::fs::symlink_metadata(&out) {
                    if m.file_type().is_symlink() {
                        return Err(bad("goes through a symbolic link"));
                    }
                    if i + 1 < last && !m.is_dir() {
                        return Err(bad("goes through a file on the receiver"));
                    }
                    if i + 1 == last && m.is_dir() != dir {
                        return Err(bad(if dir {
                            "is a file on the receiver"
                        } else {
                            "is a folder on the receiver"
                        }));
                    }
                }
            }
            Component::CurDir => return Err(bad("contains `.`")),
            Component::ParentDir => return Err(bad("contains `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(bad("is absolute")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clashes a set of names can hold, and sets that hold none.
    #[test]
    fn name_clashes() {
        use NameClash::*;
        let cases: &[(&[&str], &[&str], Option<NameClash>)] = &[
            (&["a/x", "b/x"], &["a", "b"], None),
            (&["x", "x"], &[], Some(Twice("x"))),
            (&["d"], &["d"], Some(FileAndFolder("d"))),
            // `d-1` sorts between `d` and `d/x`: not a clash, and no hiding place.
            (
                &["d", "d-1", "d/x"],
                &[],
                Some(InsideFile {
                    name: "d/x",
                    file: "d",
                }),
            ),
            (
                &["d"],
                &["d/e"],
                Some(InsideFile {
                    name: "d/e",
                    file: "d",
                }),
            ),
            (&["d-1", "d/x"], &["d"], None),
        ];
        for &(files, dirs, want) in cases {
            assert_eq!(name_clash(files, dirs), want, "{files:?} {dirs:?}");
        }
    }

    #[test]
    fn unsafe_names_are_refused() {
        let root = tempfile::tempdir().unwrap();
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a/./b",
            "a\\b",
            "a\0b",
            "a/",
        ] {
            assert!(safe_join(root.path(), bad).is_err(), "{bad:?}");
        }
        std::os::unix::fs::symlink("/tmp", root.path().join("link")).unwrap();
        assert!(safe_join(root.path(), "link/x").is_err());
        // Where the receiver's files are in the way: a file where a folder must be
        // made, a folder where the file must go.
        std::fs::write(root.path().join("f"), "f").unwrap();
        std::fs::create_dir(root.path().join("d")).unwrap();
        for (name, why) in [
            ("f/x", "goes through a file"),
            ("d", "is a folder"),
            // Another file's part file, or a journal.
            (".x.longhaul-part", "partial files"),
            ("a/.x.longhaul-journal", "partial files"),
            ("a/.x.longhaul-journal.new", "partial files"),
        ] {
            let e = safe_join(root.path(), name).unwrap_err().to_string();
            assert!(e.contains(why), "{name}: {e}");
        }
        assert!(safe_join(root.path(), "f").is_ok());
        assert!(safe_join(root.path(), "d/x").is_ok());
        // A folder offered may be one already, not a file.
        assert!(safe_join_dir(root.path(), "d").is_ok());
        assert!(safe_join_dir(root.path(), "d/new").is_ok());
        let e = safe_join_dir(root.path(), "f").unwrap_err().to_string();
        assert!(e.contains("is a file on the receiver"), "{e}");
        assert!(safe_join_dir(root.path(), "../up").is_err());
        assert!(safe_join(root.path(), "x.longhaul-part").is_ok());
        assert_eq!(part_name("b.dat"), ".b.dat.longhaul-part");
        assert_eq!(
            safe_join(root.path(), "a/b.dat").unwrap(),
            root.path().join("a/b.dat")
        );
    }
}
