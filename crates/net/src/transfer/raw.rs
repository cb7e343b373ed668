//! A sender's control channel driven message by message: for tests and tools that
//! speak the protocol by hand (what does a receiver do with this offer, this
//! digest?). It runs the same handshake as `send`, so it reaches a receiver only
//! with the token.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::control::{Control, Msg, Side, TimedStream, PROTOCOL_VERSION};
use super::TransferError;
use crate::secure::{self, handshake_initiator, Preamble, SessionKeys};

/// An authenticated sender's control channel, one message at a time.
pub struct RawSender {
    ctl: Control,
    keys: SessionKeys,
}

impl RawSender {
    /// Connects to the receiver at `addr`, runs the handshake with `token` and says
    /// hello; `encrypt` is what the data channels would be.
    pub fn connect(
        addr: SocketAddr,
        token: &str,
        encrypt: bool,
        timeout: Duration,
    ) -> Result<Self, TransferError> {
        let (ctl, keys) = open_session(addr, token, encrypt, timeout, timeout)?;
        Ok(RawSender { ctl, keys })
    }

    /// Sends one message.
    pub fn send(&mut self, m: &Msg) -> Result<(), TransferError> {
        self.ctl.send(m)
    }

    /// The next message; an error once the receiver has closed the channel.
    pub fn recv(&mut self) -> Result<Msg, TransferError> {
        self.ctl.recv()
    }

    /// What data channel `c` must open with.
    pub fn ticket(&self, c: usize) -> [u8; 32] {
        self.keys.ticket(c)
    }
}

/// A sender's side of a session's start: connects to the receiver at `addr`, runs
/// the handshake with `token` (the receiver proves the token before anything about
/// the files is said) within `timeout` a step, sends the key confirmation
/// (`Hello`), and then waits `then_wait` a step for the receiver.
pub(crate) fn open_session(
    addr: SocketAddr,
    token: &str,
    encrypt: bool,
    timeout: Duration,
    then_wait: Duration,
) -> Result<(Control, SessionKeys), TransferError> {
    let tcp = TcpStream::connect_timeout(&addr, timeout)
        .map_err(TransferError::io(format!("connecting to {addr}")))?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(TransferError::io("control channel"))?;
    let mut stream = TimedStream::new(tcp);
    let preamble = Preamble {
        version: PROTOCOL_VERSION,
        encrypt,
    };
    let keys = handshake_initiator(&mut stream, &secure::psk(token), preamble)?;
    stream
        .get_ref()
        .set_read_timeout(Some(then_wait))
        .map_err(TransferError::io("control channel"))?;
    let mut ctl = Control::new(stream, &keys, Side::Sender, secure::MAX_RECORD)?;
    ctl.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
    })?;
    Ok((ctl, keys))
}
