//! Control-channel messages: one JSON object per line over TCP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

use super::TransferError;

/// The protocol version both sides must speak.
/// Version 2: digests, confirmations and resends flow while the blocks do (version
/// 1 exchanged them after the last block). Version 3: each data channel opens with
/// its ticket. Version 4: `Accept.have` carries each held block's hash, a `Digest`
/// names the held blocks that changed and were sent again, and an `Offer` names
/// the folders too. Version 5: `Accept.present` names the files the receiver holds
/// whole already, `Checking` keeps the sender waiting while the receiver reads
/// back what it holds, and files carry their modification times.
pub const PROTOCOL_VERSION: u32 = 5;

/// Longest control line accepted (a file list of many names is one line).
const MAX_LINE: u64 = 256 << 20;

/// A file offered: its name relative to the receiver's directory, and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// `/`-separated relative name.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// Permission bits (`0o777`) for the copy, less the receiver's umask; without
    /// them, `0o666` less the umask (what a new file gets).
    #[serde(default)]
    pub mode: Option<u32>,
    /// Modification time, seconds and nanoseconds since the Unix epoch: the copy
    /// gets it, as with `cp -p` or `rsync -t`. Without it, the copy's is when it
    /// was put in place.
    #[serde(default)]
    pub mtime: Option<(i64, u32)>,
}

/// A folder offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// `/`-separated relative name.
    pub path: String,
    /// Permission bits (`0o777`), as for a file (the owner keeps `rwx`, so the
    /// receiver can put the files in).
    #[serde(default)]
    pub mode: Option<u32>,
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// Sender: the protocol version it speaks.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// Receiver: a fresh nonce, hex.
    Challenge {
        /// 32 random bytes, hex.
        nonce: String,
    },
    /// Sender: BLAKE3 keyed with the token's key over the nonce, hex.
    Auth {
        /// The MAC, hex.
        mac: String,
    },
    /// Sender: what it wants to send and how.
    Offer {
        /// The files.
        files: Vec<FileEntry>,
        /// The folders of the trees offered, made even when no file goes into
        /// them: an empty folder arrives too.
        #[serde(default)]
        dirs: Vec<DirEntry>,
        /// UDT channels to open.
        channels: u16,
        /// Largest block, bytes.
        block_size: u32,
        /// What the data channels run.
        #[serde(default)]
        transport: super::Transport,
    },
    /// Receiver: the ports to connect the data channels to, one per channel.
    Accept {
        /// Ports on the receiver's address.
        ports: Vec<u16>,
        /// Per file, the blocks the receiver already holds from an interrupted
        /// session: (offset, BLAKE3 hash, hex). The sender does not send them again
        /// unless its own block there differs (the file changed since).
        #[serde(default)]
        have: Vec<Vec<(u64, String)>>,
        /// Files the receiver holds whole already, of the size offered (from an
        /// earlier session, or another copy): (index in the offer, the file's
        /// digest there, hex). The sender sends none of their blocks while it
        /// hashes them. Where its own digest differs, the receiver's file is
        /// another of that name and size: with `replace`, the sender then sends
        /// the file whole (its `Digest` says `replaced`); without, the file fails
        /// on both sides and stays as it is. One digest per file, not a hash per
        /// block as in `have`, so that the answer to a tree sent again grows with
        /// the files offered, not with the bytes held.
        #[serde(default)]
        present: Vec<(u32, String)>,
        /// The receiver replaces files (`recv --overwrite`): a file in `present`
        /// whose contents differ is to be sent whole.
        #[serde(default)]
        replace: bool,
    },
    /// Receiver, before `Accept`: it is reading back what it holds (files already
    /// there, blocks an interrupted session kept) to hash them, and has read `bytes`
    /// of `total`. Sent about once a second, so a sender waiting for `Accept` while
    /// terabytes are read back knows the receiver is alive.
    Checking {
        /// Bytes read back so far.
        bytes: u64,
        /// Bytes to read back in all.
        total: u64,
    },
    /// Receiver: no, and why: the offer is refused, or (after `Accept`) the session
    /// failed; the receiver closes the control channel after it.
    Reject {
        /// Why, for the sender's user.
        reason: String,
    },
    /// Sender: a file's digest (BLAKE3 over its blocks' BLAKE3 hashes in order),
    /// once every block of it is on its way.
    Digest {
        /// Index in the offer.
        file: u32,
        /// The digest, hex.
        digest: String,
        /// Offsets of blocks the receiver held (`Accept.have`) that differed and
        /// were sent again: the receiver checks the file only with their new copies.
        #[serde(default)]
        changed: Vec<u64>,
        /// The receiver held the file whole (`Accept.present`) with other
        /// contents, and every block of it was sent to replace it (`Accept.replace`).
        #[serde(default)]
        replaced: bool,
    },
    /// Receiver: these blocks (file, offset, length) failed their hash on arrival;
    /// send them again, on the control channel (as soon as one is seen).
    Resend {
        /// The blocks.
        blocks: Vec<(u32, u64, u32)>,
    },
    /// Sender: a block sent again; `len` bytes of data and their 32-byte BLAKE3
    /// follow the line.
    Block {
        /// File index.
        file: u32,
        /// Offset in the file.
        offset: u64,
        /// Bytes of data.
        len: u32,
    },
    /// Receiver: a file is complete (on disk, renamed into place) or failed; sent
    /// as each file completes, so a sender that does not pipeline waits for it.
    FileDone {
        /// Index in the offer.
        file: u32,
        /// Whether its digest matched.
        ok: bool,
    },
    /// Receiver: every file is done.
    Finished,
}

/// One side of the control channel.
pub(crate) struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// The reading half of a [`Control`], for a thread that waits on the peer.
pub(crate) struct ControlReader(Control);

/// The writing half of a [`Control`]: one message (with its raw bytes) per call, so
/// that threads sharing it behind a lock never interleave messages.
pub(crate) struct ControlWriter(TcpStream);

impl ControlReader {
    pub fn recv(&mut self) -> Result<Msg, TransferError> {
        self.0.recv()
    }
    pub fn recv_raw(&mut self, b: &mut [u8]) -> Result<(), TransferError> {
        self.0.recv_raw(b)
    }
}

impl ControlWriter {
    pub fn send(&mut self, m: &Msg) -> Result<(), TransferError> {
        self.send_with(m, &[])
    }

    /// Closes the control channel both ways (its reader sees the end at once).
    pub fn shutdown(&mut self) -> Result<(), TransferError> {
        self.0
            .shutdown(std::net::Shutdown::Both)
            .map_err(TransferError::io("control channel: shutdown"))
    }

    /// Sends `m` and the raw bytes `parts` that follow it, in one write.
    pub fn send_with(&mut self, m: &Msg, parts: &[&[u8]]) -> Result<(), TransferError> {
        let mut out = serde_json::to_vec(m).expect("messages serialise");
        out.push(b'\n');
        for p in parts {
            out.extend_from_slice(p);
        }
        self.0
            .write_all(&out)
            .map_err(TransferError::io("control channel: write"))
    }
}

impl Control {
    pub fn new(s: TcpStream) -> Result<Self, TransferError> {
        let writer = s
            .try_clone()
            .map_err(TransferError::io("control channel"))?;
        Ok(Control {
            reader: BufReader::new(s),
            writer,
        })
    }

    /// Splits into a reader for one thread and a writer to share, for the data
    /// phase. Reads then wait without a deadline: a file of a terabyte has nothing
    /// to say until its last block, and a dead peer ends the data channels anyway.
    pub fn split(self) -> Result<(ControlReader, ControlWriter), TransferError> {
        self.writer
            .set_read_timeout(None)
            .map_err(TransferError::io("control channel"))?;
        let w = self
            .writer
            .try_clone()
            .map_err(TransferError::io("control channel"))?;
        Ok((ControlReader(self), ControlWriter(w)))
    }

    pub fn send(&mut self, m: &Msg) -> Result<(), TransferError> {
        let mut line = serde_json::to_vec(m).expect("messages serialise");
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(TransferError::io("control channel: write"))
    }

    /// Raw bytes after a message.
    pub fn recv_raw(&mut self, b: &mut [u8]) -> Result<(), TransferError> {
        self.reader
            .read_exact(b)
            .map_err(TransferError::io("control channel: read"))
    }

    pub fn recv(&mut self) -> Result<Msg, TransferError> {
        let mut line = String::new();
        let n = (&mut self.reader)
            .take(MAX_LINE)
            .read_line(&mut line)
            .map_err(TransferError::io("control channel: read"))?;
        if n == 0 {
            return Err(TransferError::Protocol(
                "the peer closed the control channel".into(),
            ));
        }
        serde_json::from_str(line.trim_end())
            .map_err(|e| TransferError::Protocol(format!("bad control message: {e}")))
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
