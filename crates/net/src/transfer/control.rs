//! Control-channel messages: one JSON object per line, in encrypted records over TCP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::TransferError;
use crate::clock::Clock;
use crate::secure::{Channel, Dir, RecordReader, RecordWriter, SessionKeys};

/// The protocol version both sides must speak.
/// Version 2: digests, confirmations and resends flow while the blocks do (version
/// 1 exchanged them after the last block). Version 3: each data channel opens with
/// its ticket. Version 4: `Accept.have` carries each held block's hash, a `Digest`
/// names the held blocks that changed and were sent again, and an `Offer` names
/// the folders too. Version 5: `Accept.present` names the files the receiver holds
/// whole already, `Checking` keeps the sender waiting while the receiver reads
/// back what it holds, and files carry their modification times. Version 6: the
/// Noise handshake and encrypted records replace the challenge and its MAC; the
/// version travels in the handshake's preamble, and `Hello` is the first record,
/// which confirms the sender's keys; block hashes are keyed with the token;
/// `Progress` counts what the receiver has stored.
pub const PROTOCOL_VERSION: u32 = 6;

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
    /// Sender: its first record after the handshake. That it decrypts proves the
    /// sender holds this session's keys (a replayed handshake message cannot make
    /// it), so the receiver counts the sender authenticated only then.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u32,
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
    /// Receiver, during the data phase, about every 100 ms while blocks arrive:
    /// bytes stored (written, or checked when discarding) so far, which is what
    /// the sender's progress shows.
    Progress {
        /// File bytes stored so far in this session.
        bytes: u64,
    },
}

/// The control connection beneath the records: a TCP stream whose reads may be
/// bounded by one deadline for a whole exchange (before authentication), not a
/// timeout per read that a client trickling a byte at a time could renew forever.
#[derive(Debug)]
pub(crate) struct TimedStream {
    s: TcpStream,
    /// (clock, deadline in ns on it): reads fail with `TimedOut` after it.
    deadline: Option<(Clock, u64)>,
}

impl TimedStream {
    pub fn new(s: TcpStream) -> Self {
        TimedStream { s, deadline: None }
    }

    /// Every read from now on must finish within `within` in all.
    pub fn set_deadline(&mut self, within: Duration) {
        let clock = Clock::new();
        let at = clock.now().as_nanos() + within.as_nanos() as u64;
        self.deadline = Some((clock, at));
    }

    /// Reads wait as long as the socket's own timeout says.
    pub fn clear_deadline(&mut self) {
        self.deadline = None;
    }

    pub fn get_ref(&self) -> &TcpStream {
        &self.s
    }
}

impl Read for TimedStream {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        if let Some((clock, at)) = &self.deadline {
            let left = at.saturating_sub(clock.now().as_nanos());
            if left == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the handshake's deadline passed",
                ));
            }
            self.s.set_read_timeout(Some(Duration::from_nanos(left)))?;
        }
        self.s.read(b)
    }
}

impl Write for TimedStream {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.s.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// Which end of the session this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Sender,
    Receiver,
}

impl Side {
    /// The direction this side writes.
    pub fn sends(self) -> Dir {
        match self {
            Side::Sender => Dir::ToReceiver,
            Side::Receiver => Dir::ToSender,
        }
    }
    /// The direction this side reads.
    pub fn reads(self) -> Dir {
        match self {
            Side::Sender => Dir::ToSender,
            Side::Receiver => Dir::ToReceiver,
        }
    }
}

type Reader = BufReader<RecordReader<TimedStream>>;

/// One side of the control channel: JSON lines (and the raw bytes of a block sent
/// again) inside authenticated, encrypted records.
pub(crate) struct Control {
    reader: Reader,
    writer: ControlWriter,
}

/// The reading half of a [`Control`], for a thread that waits on the peer.
pub(crate) struct ControlReader(Reader);

/// The writing half of a [`Control`]: one message (with its raw bytes) per call, so
/// that threads sharing it behind a lock never interleave messages.
pub(crate) struct ControlWriter(RecordWriter<TcpStream>);

impl ControlReader {
    pub fn recv(&mut self) -> Result<Msg, TransferError> {
        recv_line(&mut self.0, MAX_LINE)
    }
    pub fn recv_raw(&mut self, b: &mut [u8]) -> Result<(), TransferError> {
        self.0
            .read_exact(b)
            .map_err(TransferError::io("control channel: read"))
    }
}

impl ControlWriter {
    pub fn send(&mut self, m: &Msg) -> Result<(), TransferError> {
        self.send_with(m, &[])
    }

    /// Closes the control channel both ways (its reader sees the end at once).
    pub fn shutdown(&mut self) -> Result<(), TransferError> {
        self.0
            .get_ref()
            .shutdown(std::net::Shutdown::Both)
            .map_err(TransferError::io("control channel: shutdown"))
    }

    /// Sends `m` and the raw bytes `parts` that follow it, sealed and flushed.
    pub fn send_with(&mut self, m: &Msg, parts: &[&[u8]]) -> Result<(), TransferError> {
        let mut line = serde_json::to_vec(m).expect("messages serialise");
        line.push(b'\n');
        let io = TransferError::io("control channel: write");
        let mut write = || -> std::io::Result<()> {
            self.0.write_all(&line)?;
            for p in parts {
                self.0.write_all(p)?;
            }
            self.0.flush()
        };
        write().map_err(io)
    }
}

/// Reads one message of at most `max` bytes.
fn recv_line(reader: &mut Reader, max: u64) -> Result<Msg, TransferError> {
    let mut line = Vec::new();
    let n = reader
        .take(max)
        .read_until(b'\n', &mut line)
        .map_err(TransferError::io("control channel: read"))?;
    if n == 0 {
        return Err(TransferError::Protocol(
            "the peer closed the control channel".into(),
        ));
    }
    if line.last() != Some(&b'\n') {
        return Err(TransferError::Protocol(format!(
            "a control message longer than {max} bytes"
        )));
    }
    serde_json::from_slice(&line).map_err(|e| {
        TransferError::Protocol(format!(
            "bad control message ({e}): \"{}\"",
            crate::secure::escaped_prefix(&line, 80)
        ))
    })
}

impl Control {
    /// The control channel over `s` for `side`, under the session's `keys`. The
    /// reader takes records of at most `max_record` bytes until [`Control::trust`].
    pub fn new(
        s: TimedStream,
        keys: &SessionKeys,
        side: Side,
        max_record: usize,
    ) -> Result<Self, TransferError> {
        let w = s
            .get_ref()
            .try_clone()
            .map_err(TransferError::io("control channel"))?;
        Ok(Control {
            reader: BufReader::with_capacity(
                16 << 10,
                RecordReader::new(s, keys.aead(Channel::Control, side.reads()), max_record),
            ),
            writer: ControlWriter(RecordWriter::new(
                w,
                keys.aead(Channel::Control, side.sends()),
            )),
        })
    }

    /// The peer has authenticated: its records may be as large as any, and reads
    /// are bounded by the socket's timeout, not the handshake's deadline.
    pub fn trust(&mut self) {
        let r = self.reader.get_mut();
        r.set_max(crate::secure::MAX_RECORD);
        r.get_mut().clear_deadline();
    }

    /// The TCP stream beneath, to set timeouts on.
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref().get_ref().get_ref()
    }

    /// Splits into a reader for one thread and a writer to share, for the data
    /// phase. Reads then wait without a deadline: a file of a terabyte has nothing
    /// to say until its last block, and a dead peer ends the data channels anyway.
    pub fn split(self) -> Result<(ControlReader, ControlWriter), TransferError> {
        self.stream()
            .set_read_timeout(None)
            .map_err(TransferError::io("control channel"))?;
        Ok((ControlReader(self.reader), self.writer))
    }

    pub fn send(&mut self, m: &Msg) -> Result<(), TransferError> {
        self.writer.send(m)
    }

    /// A message of at most `max` bytes (before authentication, a small one).
    pub fn recv_limited(&mut self, max: u64) -> Result<Msg, TransferError> {
        recv_line(&mut self.reader, max)
    }

    pub fn recv(&mut self) -> Result<Msg, TransferError> {
        recv_line(&mut self.reader, MAX_LINE)
    }
}
