//! `longhaul send` / `longhaul recv`, first version: files over parallel UDT
//! channels (or TCP streams), with a TCP control channel that authenticates the sender.
//!
//! ```text
//!  sender                                   receiver (listens on TCP)
//!   |-- Hello{version} ------------------------>|
//!   |<------------------------ Challenge{nonce} |
//!   |-- Auth{mac = BLAKE3_k(nonce)} ----------->|   k = BLAKE3(token): the token
//!   |-- Offer{files, channels, block size} ---->|   never crosses the network
//!   |<------------- Accept{UDT ports} / Reject  |
//!   |== N UDT channels: [header][data][BLAKE3(data)] ... [end] ==>|
//!   |<------------------ FileDone{file, ok} ... |   a file is renamed into place
//!   |<--------------------------------- Finished|   once every block checked out
//! ```
//!
//! A file's digest is BLAKE3 over its blocks' BLAKE3 hashes in order, computed by
//! both sides while the blocks pass (no second read). The receiver writes each
//! block at its offset in a temporary file (`.NAME.longhaul-part`) and renames it
//! when the file is complete and its digest matches. A block that fails its hash on
//! arrival is asked for again (`Resend`) once the channels are done, and comes back
//! on the control channel (`Block` and its bytes), up to three rounds.
//!
//! Many files: the offer lists them all at once, every channel takes the next block
//! of any file, so files follow each other without a round trip and small files
//! share the channels' streams (100 000 files of up to 500 bytes: 10 s on
//! loopback). Each side keeps only the files it is working on open; the receiver
//! flushes the session with one `syncfs` before renaming files into place.
//!
//! Resume: the receiver appends every checked block to `.NAME.longhaul-journal`
//! (files of more than one block; a one-block file is all or nothing).
//! After an interrupted session the part file and the journal stay, and the next
//! session of the same file and block size tells the sender which blocks it holds
//! (`Accept.have`). The sender reads and hashes those for the digest but does not
//! send them.
//!
//! Not yet (issue 8): concurrency and pipelining as separate knobs (the channels
//! share one queue of blocks, which is pipelining with full concurrency).

mod channel;
mod control;
mod recv;
mod send;

pub use channel::Transport;
pub use control::{FileEntry, Msg, PROTOCOL_VERSION};
pub use recv::{receive, RecvOptions, RecvSummary};
pub use send::{list_files, send, SendOptions, SendSummary};

use std::path::{Component, Path, PathBuf};

/// What can go wrong in a transfer.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A socket or file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A UDT channel failed.
    #[error("data channel: {0}")]
    Channel(#[from] crate::NetError),
    /// The peer broke the protocol, or refused.
    #[error("{0}")]
    Protocol(String),
    /// The sender's token did not authenticate.
    #[error("authentication failed: the tokens differ")]
    Auth,
    /// A file name the receiver will not write.
    #[error("refusing `{path}`: {why}")]
    UnsafePath {
        /// The name as offered.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// A block or file failed its check.
    #[error("{0}")]
    Integrity(String),
}

impl TransferError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransferError {
        let what = what.into();
        move |source| TransferError::Io { what, source }
    }
}

/// Written after a channel's last block: a header no block can have (its offset
/// and length overflow), so the receiver knows the channel is done without waiting
/// for the transport's shutdown, which UDT sends once and may lose.
pub(crate) const END_OF_CHANNEL: [u8; longhaul_proto::transfer::HEADER_LEN] =
    [0xff; longhaul_proto::transfer::HEADER_LEN];

/// The most buffer memory one side of a session may take (the issue's default
/// cap): per channel a block buffer and the transport's buffer.
pub const MEMORY_CAP: u64 = 512 << 20;

/// Buffer memory a session of `channels` channels and `block_size`-byte blocks
/// takes on one side: a block (and its hash) per channel, and per UDT channel its
/// packet buffer (the larger of send and receive; TCP's lives in the kernel).
pub fn session_memory(
    channels: u16,
    block_size: u32,
    transport: Transport,
    udt: &longhaul_proto::udt::UdtConnConfig,
) -> u64 {
    let transport_buffer = match transport {
        Transport::Udt => u64::from(udt.rcv_buf_pkts.max(udt.snd_buf_pkts)) * u64::from(udt.mss),
        Transport::Tcp => 0,
    };
    u64::from(channels) * (u64::from(block_size) + 32 + transport_buffer)
}

/// The key both sides derive from the pre-shared token.
pub(crate) fn key(token: &str) -> [u8; 32] {
    *blake3::hash(token.as_bytes()).as_bytes()
}

/// A relative name offered by a sender, checked and joined under `root`: no
/// absolute paths, no `..`, no empty or `.` parts, no component that is a symlink
/// on the receiver's side (which could lead out of `root`).
pub fn safe_join(root: &Path, name: &str) -> Result<PathBuf, TransferError> {
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
    let rel = Path::new(name);
    let mut out = root.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(p) => {
                out.push(p);
                if let Ok(m) = std::fs::symlink_metadata(&out) {
                    if m.file_type().is_symlink() {
                        return Err(bad("goes through a symbolic link"));
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
        assert_eq!(
            safe_join(root.path(), "a/b.dat").unwrap(),
            root.path().join("a/b.dat")
        );
    }
}
