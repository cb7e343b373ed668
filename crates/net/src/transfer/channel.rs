//! A data channel: a UDT connection or a TCP stream, as the offer chose.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use ring::aead::LessSafeKey;

use super::control::Side;
use super::TransferError;
use crate::clock::Clock;
use crate::secure::{Channel, PacketProtection, RecordReader, RecordWriter, SessionKeys};
use crate::{UdtListener, UdtSocket};

/// How one data channel is protected: by default TCP records or UDT packet
/// protection under the channel's own keys; with `--no-encryption`, nothing (the
/// blocks' keyed hashes still authenticate what is stored).
pub(crate) enum Seal {
    /// In clear: UDT4's wire format, or plain TCP.
    Clear,
    /// TCP records: (seal, open).
    Tcp(Box<(LessSafeKey, LessSafeKey)>),
    /// UDT packets. Taken by the socket that uses it and given back if that
    /// connection is turned away, so its counter runs on: one key never seals two
    /// datagrams with one nonce, however often the port is bound again.
    Udt(Option<Box<PacketProtection>>),
}

impl Seal {
    /// Data channel `c`'s protection at `side`.
    pub fn new(keys: &SessionKeys, c: usize, side: Side, t: Transport, encrypt: bool) -> Self {
        match (encrypt, t) {
            (false, _) => Seal::Clear,
            (true, Transport::Tcp) => Seal::Tcp(Box::new((
                keys.aead(Channel::Data(c), side.sends()),
                keys.aead(Channel::Data(c), side.reads()),
            ))),
            (true, Transport::Udt) => {
                Seal::Udt(Some(Box::new(keys.packet_protection(c, side.sends()))))
            }
        }
    }

    fn udt(&mut self) -> Result<Option<PacketProtection>, TransferError> {
        match self {
            Seal::Udt(p) => p
                .take()
                .map(|p| Some(*p))
                .ok_or_else(|| TransferError::Protocol("a data channel's keys were lost".into())),
            _ => Ok(None),
        }
    }

    fn tcp(&self, s: TcpStream) -> Result<DataChannel, TransferError> {
        match self {
            Seal::Tcp(k) => {
                let w = s.try_clone().map_err(TransferError::io("data channel"))?;
                Ok(DataChannel::SecureTcp(Box::new((
                    RecordReader::new(s, k.1.clone(), crate::secure::MAX_RECORD),
                    RecordWriter::new(w, k.0.clone()),
                ))))
            }
            _ => Ok(DataChannel::Tcp(s)),
        }
    }

    /// Takes back the packet protection of a UDT connection turned away.
    pub fn restore(&mut self, s: &mut DataChannel) {
        if let (Seal::Udt(slot), DataChannel::Udt(u)) = (self, s) {
            if let Some(p) = u.take_protection() {
                *slot = Some(Box::new(p));
            }
        }
    }
}

/// What the data channels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// UDT over UDP (the engine of the simulator).
    #[default]
    Udt,
    /// The kernel's TCP.
    Tcp,
}

/// A bound, not yet connected data channel on the receiver. It can accept again
/// after turning a connection away (see `recv::accept_sender`).
pub(crate) enum Listener {
    /// A UDT listener's socket becomes the connection it accepts, so after one that
    /// was turned away the same address is bound afresh; UDP leaves nothing behind
    /// a closed socket to stop that.
    Udt(Option<UdtListener>, SocketAddr),
    /// The listening socket stays: a connection behind the one turned away is
    /// already waiting in its backlog.
    Tcp(TcpListener),
}

/// A connected data channel.
pub(crate) enum DataChannel {
    Udt(Box<UdtSocket>),
    Tcp(TcpStream),
    /// TCP inside records: reading and writing halves.
    SecureTcp(Box<(RecordReader<TcpStream>, RecordWriter<TcpStream>)>),
}

impl Listener {
    pub fn bind(t: Transport, addr: SocketAddr) -> Result<Self, TransferError> {
        let what = || TransferError::io("binding a data channel");
        Ok(match t {
            Transport::Udt => {
                let l = UdtListener::bind(addr).map_err(what())?;
                let bound = l.local_addr().map_err(what())?;
                Listener::Udt(Some(l), bound)
            }
            Transport::Tcp => Listener::Tcp(TcpListener::bind(addr).map_err(what())?),
        })
    }

    pub fn port(&self) -> Result<u16, TransferError> {
        let what = TransferError::io("binding a data channel");
        match self {
            Listener::Udt(_, bound) => Ok(bound.port()),
            Listener::Tcp(l) => l.local_addr().map(|a| a.port()).map_err(what),
        }
    }

    /// Waits for a connection, at most `timeout`, protected by `seal`.
    pub fn accept(
        &mut self,
        cfg: longhaul_proto::udt::UdtConnConfig,
        timeout: Duration,
        seal: &mut Seal,
    ) -> Result<DataChannel, TransferError> {
        match self {
            Listener::Udt(l, bound) => {
                let l = match l.take() {
                    Some(l) => l,
                    None => UdtListener::bind(*bound).map_err(TransferError::io(format!(
                        "binding data channel port {bound} again"
                    )))?,
                };
                let protect = seal.udt()?;
                Ok(DataChannel::Udt(Box::new(
                    l.accept_protected(cfg, timeout, protect)?,
                )))
            }
            Listener::Tcp(l) => {
                let what = || TransferError::io("accepting a data channel");
                l.set_nonblocking(true).map_err(what())?;
                let clock = Clock::new();
                loop {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false).map_err(what())?;
                            return seal.tcp(s);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            if clock.now().as_nanos() > timeout.as_nanos() as u64 {
                                return Err(TransferError::Protocol(format!(
                                    "no data channel connected within {timeout:?}"
                                )));
                            }
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => return Err(what()(e)),
                    }
                }
            }
        }
    }
}

impl DataChannel {
    pub fn connect(
        t: Transport,
        addr: SocketAddr,
        cfg: longhaul_proto::udt::UdtConnConfig,
        timeout: Duration,
        mut seal: Seal,
        group: Option<&crate::udt::RateGroup>,
    ) -> Result<Self, TransferError> {
        match t {
            Transport::Udt => Ok(DataChannel::Udt(Box::new(UdtSocket::connect_member(
                addr,
                cfg,
                timeout,
                seal.udt()?,
                group,
            )?))),
            Transport::Tcp => seal.tcp(TcpStream::connect_timeout(&addr, timeout).map_err(
                TransferError::io(format!("connecting a data channel to {addr}")),
            )?),
        }
    }

    /// The TCP stream beneath, for timeouts and shutdowns.
    fn tcp_stream(&self) -> Option<&TcpStream> {
        match self {
            DataChannel::Udt(_) => None,
            DataChannel::Tcp(s) => Some(s),
            DataChannel::SecureTcp(rw) => Some(rw.0.get_ref()),
        }
    }

    pub fn write_all(&mut self, b: &[u8]) -> Result<(), TransferError> {
        let io = TransferError::io("data channel: write");
        match self {
            DataChannel::Udt(s) => Ok(s.write_all(b)?),
            DataChannel::Tcp(s) => s.write_all(b).map_err(io),
            DataChannel::SecureTcp(rw) => rw.1.write_all(b).and_then(|()| rw.1.flush()).map_err(io),
        }
    }

    /// Writes a block: over UDT as slices of `b` itself (no copy into the send
    /// buffer; `b` is unique again once acknowledged), over TCP as bytes.
    pub fn write_block(&mut self, b: &bytes::Bytes) -> Result<(), TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.write_all_shared(b)?),
            _ => self.write_all(b),
        }
    }

    /// Waits until little of what was written is still unsent (see
    /// [`UdtSocket::drain_below`]). TCP channels return at once: the kernel's
    /// socket takes what it takes, and its unsent data is not this side's to see.
    pub fn drain_below(&mut self, cushion: usize, time: Duration) -> Result<(), TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.drain_below(cushion, time)?),
            DataChannel::Tcp(_) | DataChannel::SecureTcp(_) => Ok(()),
        }
    }

    pub fn read(&mut self, b: &mut [u8]) -> Result<usize, TransferError> {
        let io = TransferError::io("data channel: read");
        match self {
            DataChannel::Udt(s) => Ok(s.read(b)?),
            DataChannel::Tcp(s) => s.read(b).map_err(io),
            DataChannel::SecureTcp(rw) => rw.0.read(b).map_err(io),
        }
    }

    /// Like [`read`](Self::read), but gives up after about `max` with `Ok(None)`.
    pub fn read_within(
        &mut self,
        b: &mut [u8],
        max: Duration,
    ) -> Result<Option<usize>, TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.read_within(b, max)?),
            DataChannel::Tcp(_) | DataChannel::SecureTcp(_) => {
                let what = || TransferError::io("data channel: read");
                let s = self
                    .tcp_stream()
                    .expect("TCP")
                    .try_clone()
                    .map_err(what())?;
                // A zero timeout means "none" to the socket.
                s.set_read_timeout(Some(max.max(Duration::from_millis(1))))
                    .map_err(what())?;
                let r = match self {
                    DataChannel::Tcp(t) => t.read(b),
                    DataChannel::SecureTcp(rw) => rw.0.read(b),
                    DataChannel::Udt(_) => unreachable!("matched above"),
                };
                s.set_read_timeout(None).map_err(what())?;
                match r {
                    Ok(n) => Ok(Some(n)),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        Ok(None)
                    }
                    Err(e) => Err(what()(e)),
                }
            }
        }
    }

    /// Ends the sending side once everything written is delivered (UDT) or queued
    /// with a FIN behind it (TCP).
    pub fn finish(self, timeout: Duration) -> Result<(), TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.close(timeout)?),
            DataChannel::Tcp(s) => s
                .shutdown(Shutdown::Write)
                .map_err(TransferError::io("data channel: shutdown")),
            DataChannel::SecureTcp(mut rw) => {
                rw.1.flush()
                    .and_then(|()| rw.1.get_ref().shutdown(Shutdown::Write))
                    .map_err(TransferError::io("data channel: shutdown"))
            }
        }
    }

    /// After the last block: stays to acknowledge until the sender shuts down (at
    /// most `max`), so its close completes; TCP needs nothing.
    pub fn linger(&mut self, max: Duration) -> Result<(), TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.linger(max)?),
            DataChannel::Tcp(_) | DataChannel::SecureTcp(_) => Ok(()),
        }
    }

    /// Waits about `max` while keeping the channel going: a UDT socket is driven by
    /// its caller, so a writer that pauses must still send what it buffered and
    /// answer its peer; the kernel does that for TCP.
    pub fn idle(&mut self, max: Duration) -> Result<(), TransferError> {
        match self {
            DataChannel::Udt(s) => Ok(s.idle(max)?),
            DataChannel::Tcp(_) | DataChannel::SecureTcp(_) => {
                std::thread::sleep(max);
                Ok(())
            }
        }
    }

    /// The UDT socket, to inject faults into.
    pub fn udt(&mut self) -> Option<&mut UdtSocket> {
        match self {
            DataChannel::Udt(s) => Some(s),
            DataChannel::Tcp(_) | DataChannel::SecureTcp(_) => None,
        }
    }
}
