//! The UDP blast protocols: RBUDP, Tsunami and SABUL, sans-IO.
//!
//! Three answers, from 2002–2003, to TCP's trouble on long fat links, each sending a
//! file as numbered fixed-size blocks in UDP datagrams at a rate the sender sets,
//! with a TCP connection beside them for control:
//! - **RBUDP** (He, Leigh, Yu, DeFanti, IEEE Cluster 2002, `rbudp.rs`) blasts every
//!   block at a fixed rate the user chose, says "done" over TCP, is sent back a
//!   bitmap of what arrived, and blasts the missing blocks again, round after round.
//! - **Tsunami** (Meiss, Indiana University 2004, `tsunami.rs`) sends at a target
//!   rate; its client asks for missing blocks and reports an error rate over TCP
//!   every update period, and the server slows or speeds its inter-packet delay.
//! - **SABUL** (Gu, Grossman, J. Grid Computing 2003, `sabul.rs`) is UDT's
//!   predecessor: loss reports, periodic acknowledgements and a rate control run
//!   every SYN period, its increase scaled to the rate's decade (multiplicative in
//!   effect) and its decrease multiplicative on loss.
//!
//! One engine type, [`BlastConnection`], holds either end of any of them; the
//! protocol's own rules are in its file. The data path is an [`Engine`] (UDP
//! payloads). The control channel is a byte stream the driver carries over a TCP
//! connection: [`BlastConnection::poll_control`] gives frames to write,
//! [`BlastConnection::handle_control`] takes bytes read, and
//! [`BlastConnection::control_connected`] says the connection is up. The simulator
//! carries it on its own TCP engine; a real tool would use a kernel socket.
//!
//! What is not here: files (blocks are counts; the simulator elides payloads, and
//! content would be the driver's), the programs' command languages, Tsunami's
//! authentication, and the original byte layouts (see `longhaul_wire::blast`).

mod rbudp;
mod sabul;
#[cfg(test)]
mod tests;
mod tsunami;

use std::collections::VecDeque;

use longhaul_wire::blast::{BlockKind, BlockRepr, Message, DATA_HEADER_LEN};
use longhaul_wire::Error as WireError;

use crate::engine::{Engine, Layer, Transmit};
use crate::time::{Bandwidth, Duration, Instant};

/// IPv4 and UDP headers in front of each datagram (the rates count them).
const IP_UDP: u64 = 28;

/// Which protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Reliable Blast UDP.
    Rbudp,
    /// Tsunami.
    Tsunami,
    /// SABUL.
    Sabul,
}

/// Tsunami's knobs, the original client's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsunamiConfig {
    /// Loss the server accepts before slowing, in 1/100000 (7500: 7.5 %).
    pub error_rate: u32,
    /// The slow-down factor's numerator and denominator (25/24).
    pub slower: (u32, u32),
    /// The speed-up factor (5/6 of the inter-packet delay).
    pub faster: (u32, u32),
    /// How often the client asks for missing blocks and reports its error rate
    /// (350 ms).
    pub update: Duration,
    /// Weight of the previous error rate in the smoothed one, percent (25).
    pub history: u32,
    /// Missing blocks the client keeps asking for before it restarts the transfer
    /// from the first of them (2048).
    pub max_requests: u32,
}

impl Default for TsunamiConfig {
    fn default() -> Self {
        TsunamiConfig {
            error_rate: 7500,
            slower: (25, 24),
            faster: (5, 6),
            update: Duration::from_millis(350),
            history: 25,
            max_requests: 2048,
        }
    }
}

/// SABUL's constants, as its 2003 release fixed them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SabulConfig {
    /// Rate-control period: the receiver's SYN report (10 ms).
    pub syn: Duration,
    /// Acknowledgement period (100 ms).
    pub ack: Duration,
    /// Period of repeated loss reports (20 ms; the shortest RTT it assumes).
    pub err: Duration,
    /// Silence after which the sender resends everything unacknowledged (1 s).
    pub exp: Duration,
    /// Smoothed loss rate above which the rate does not grow (0.1 %).
    pub loss_limit: f64,
    /// Slowest sending: the largest inter-packet time (1000 µs).
    pub max_interval: Duration,
    /// Blocks sent and not yet acknowledged, at most (the receiver's flag window).
    pub window: u32,
}

impl Default for SabulConfig {
    fn default() -> Self {
        SabulConfig {
            syn: Duration::from_millis(10),
            ack: Duration::from_millis(100),
            err: Duration::from_millis(20),
            exp: Duration::from_secs(1),
            loss_limit: 0.001,
            max_interval: Duration::from_micros(1000),
            window: 1 << 16,
        }
    }
}

/// One transfer's parameters (both ends are given the same).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlastConfig {
    /// The protocol.
    pub scheme: Scheme,
    /// Bytes to move. The receiver knows it as the original tools' receivers do
    /// (RBUDP's and SABUL's receive calls take the length; Tsunami's client learns
    /// it from the server's reply, which carries it here too and is checked).
    pub size: u64,
    /// UDP payload per datagram, header included (1472: 1500-byte IP packets).
    pub datagram: u16,
    /// RBUDP's blast rate, Tsunami's target rate, SABUL's fastest rate (its
    /// smallest inter-packet time, 10 µs in the release); IP and UDP headers count.
    pub rate: Bandwidth,
    /// Tsunami's knobs.
    pub tsunami: TsunamiConfig,
    /// SABUL's constants.
    pub sabul: SabulConfig,
}

impl BlastConfig {
    /// A transfer of `size` bytes at `rate` with the defaults.
    pub fn new(scheme: Scheme, size: u64, rate: Bandwidth) -> Self {
        BlastConfig {
            scheme,
            size,
            datagram: 1472,
            rate,
            tsunami: TsunamiConfig::default(),
            sabul: SabulConfig::default(),
        }
    }

    /// Payload bytes per block.
    pub fn block_len(&self) -> u64 {
        u64::from(self.datagram) - DATA_HEADER_LEN as u64
    }

    /// Number of blocks.
    pub fn blocks(&self) -> u32 {
        self.size.div_ceil(self.block_len()) as u32
    }

    /// Payload bytes of block `b` (the last may be short).
    pub fn len_of(&self, b: u32) -> u64 {
        let bl = self.block_len();
        (self.size - u64::from(b) * bl).min(bl)
    }

    /// Nanoseconds between datagrams at `rate` (IP and UDP headers counted).
    fn interval_at(&self, rate: Bandwidth) -> f64 {
        (u64::from(self.datagram) + IP_UDP) as f64 * 8e9 / rate.as_bps().max(1) as f64
    }
}

/// What a blast connection tells its application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Receiver: every block arrived.
    Complete,
    /// Sender: the receiver has everything; nothing more will be sent.
    Finished,
}

/// Counters of one end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlastStats {
    /// Sender: blocks sent for the first time.
    pub originals: u64,
    /// Sender: blocks sent again.
    pub retransmitted: u64,
    /// Receiver: datagrams received.
    pub received: u64,
    /// Receiver: datagrams of blocks it already had.
    pub duplicates: u64,
    /// Control messages sent.
    pub control_sent: u64,
    /// Control bytes sent.
    pub control_bytes: u64,
    /// Datagrams or control frames that were not this protocol's, dropped.
    pub bad_input: u64,
}

/// Which blocks arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bitmap {
    words: Vec<u64>,
    len: u32,
    count: u32,
}

impl Bitmap {
    fn new(len: u32) -> Self {
        Bitmap {
            words: vec![0; (len as usize).div_ceil(64)],
            len,
            count: 0,
        }
    }
    fn get(&self, b: u32) -> bool {
        self.words[b as usize / 64] & (1u64 << (b % 64)) != 0
    }
    /// Sets bit `b`; true if it was clear.
    fn set(&mut self, b: u32) -> bool {
        let bit = 1u64 << (b % 64);
        let w = &mut self.words[b as usize / 64];
        let fresh = *w & bit == 0;
        *w |= bit;
        if fresh {
            self.count += 1;
        }
        fresh
    }
    fn full(&self) -> bool {
        self.count == self.len
    }
    /// The first clear bit at or after `from`, or `len`.
    fn first_missing_from(&self, from: u32) -> u32 {
        let mut w = from as usize / 64;
        let mut bits = !self.words.get(w).copied().unwrap_or(u64::MAX) & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return (w as u32 * 64 + bits.trailing_zeros()).min(self.len);
            }
            w += 1;
            match self.words.get(w) {
                Some(x) => bits = !x,
                None => return self.len,
            }
        }
    }
    /// The clear bits, in order.
    #[cfg(test)]
    fn missing(&self) -> impl Iterator<Item = u32> + '_ {
        let mut next = 0;
        core::iter::from_fn(move || {
            let m = self.first_missing_from(next);
            next = m + 1;
            (m < self.len).then_some(m)
        })
    }
    /// As bytes, least significant bit first.
    fn to_bytes(&self) -> Vec<u8> {
        let n = (self.len as usize).div_ceil(8);
        self.words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(n)
            .collect()
    }
}

/// Spacing of the sender's datagrams: the next departure, in nanoseconds kept
/// fractional so that rates are exact over many packets.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pacer {
    next_ns: f64,
    interval_ns: f64,
}

impl Pacer {
    fn ready(&self, now: Instant) -> bool {
        self.next_ns <= now.as_nanos() as f64
    }
    fn at(&self) -> Instant {
        Instant::from_nanos(self.next_ns.ceil() as u64)
    }
    /// A datagram left at `now`: the next may leave one interval later (an idle
    /// sender does not bank departures).
    fn sent(&mut self, now: Instant) {
        self.next_ns = self.next_ns.max(now.as_nanos() as f64) + self.interval_ns;
    }
    /// Holds the next departure back by `d` (SABUL's freeze after a decrease).
    fn hold(&mut self, now: Instant, d: Duration) {
        self.next_ns = self.next_ns.max(now.as_nanos() as f64) + d.as_nanos() as f64;
    }
}

/// The next block of a sender that resends before it sends anything new: `resend`
/// if there is one, else `next` (which moves on).
fn resend_or_new(resend: Option<u32>, next: &mut u32) -> (u32, BlockKind) {
    match resend {
        Some(b) => (b, BlockKind::Retransmission),
        None => {
            *next += 1;
            (*next - 1, BlockKind::Original)
        }
    }
}

/// What a protocol's rules act on, at either end: its output queue and events.
#[derive(Debug)]
struct Io {
    cfg: BlastConfig,
    blocks: u32,
    out: VecDeque<Message>,
    events: VecDeque<Event>,
    stats: BlastStats,
}

impl Io {
    fn send(&mut self, m: Message) {
        self.stats.control_sent += 1;
        self.stats.control_bytes += m.frame_len() as u64;
        self.out.push_back(m);
    }
}

/// A protocol's sending rules.
trait SendRules: core::fmt::Debug + Send {
    /// The control connection is up.
    fn connected(&mut self, _now: Instant, _io: &mut Io, _pacer: &mut Pacer) {}
    /// A control message from the receiver.
    fn on_message(&mut self, now: Instant, m: Message, io: &mut Io, pacer: &mut Pacer);
    /// Whether a block waits to be sent (when the pacer allows).
    fn wants_to_send(&self) -> bool;
    /// The block to send now, taken from the queue (only called when
    /// `wants_to_send`).
    fn next_block(
        &mut self,
        now: Instant,
        io: &mut Io,
        pacer: &mut Pacer,
    ) -> Option<(u32, BlockKind)>;
    /// Its own timer, if armed.
    fn timeout(&self) -> Option<Instant>;
    /// That timer is due.
    fn on_timeout(&mut self, _now: Instant, _io: &mut Io) {}
    /// Whether it is done.
    fn finished(&self) -> bool;
}

/// A protocol's receiving rules (the bitmap is kept for them).
trait RecvRules: core::fmt::Debug + Send {
    /// The control connection is up.
    fn connected(&mut self, _now: Instant, _io: &mut Io) {}
    /// A control message from the sender.
    fn on_message(&mut self, now: Instant, m: Message, io: &mut Io, got: &Bitmap);
    /// Block `b` arrived; `fresh` if it was new (`got` already holds it).
    fn on_block(&mut self, now: Instant, b: u32, fresh: bool, io: &mut Io, got: &Bitmap);
    /// Its timer, if armed.
    fn timeout(&self) -> Option<Instant>;
    /// That timer is due.
    fn on_timeout(&mut self, now: Instant, io: &mut Io, got: &Bitmap);
}

#[derive(Debug)]
enum End {
    Sender {
        rules: Box<dyn SendRules>,
        pacer: Pacer,
    },
    Receiver {
        rules: Box<dyn RecvRules>,
        got: Bitmap,
        completed: bool,
    },
}

/// One end of a blast transfer (see the module doc).
#[derive(Debug)]
pub struct BlastConnection {
    io: Io,
    end: End,
    /// Control bytes read but not yet a whole frame.
    partial: Vec<u8>,
}

impl BlastConnection {
    /// The sending end.
    pub fn sender(cfg: BlastConfig) -> Self {
        let rules: Box<dyn SendRules> = match cfg.scheme {
            Scheme::Rbudp => Box::new(rbudp::Sender::new(&cfg)),
            Scheme::Tsunami => Box::new(tsunami::Sender::new(&cfg)),
            Scheme::Sabul => Box::new(sabul::Sender::new(&cfg)),
        };
        BlastConnection {
            io: Io::new(cfg),
            end: End::Sender {
                rules,
                pacer: Pacer {
                    next_ns: 0.0,
                    interval_ns: cfg.interval_at(cfg.rate),
                },
            },
            partial: vec![],
        }
    }

    /// The receiving end.
    pub fn receiver(cfg: BlastConfig) -> Self {
        let rules: Box<dyn RecvRules> = match cfg.scheme {
            Scheme::Rbudp => Box::new(rbudp::Receiver),
            Scheme::Tsunami => Box::new(tsunami::Receiver::new(&cfg)),
            Scheme::Sabul => Box::new(sabul::Receiver::new(&cfg)),
        };
        let io = Io::new(cfg);
        let got = Bitmap::new(io.blocks);
        BlastConnection {
            io,
            end: End::Receiver {
                rules,
                got,
                completed: false,
            },
            partial: vec![],
        }
    }

    /// The parameters.
    pub fn config(&self) -> &BlastConfig {
        &self.io.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &BlastStats {
        &self.io.stats
    }
    /// Receiver: payload bytes of the distinct blocks that arrived.
    pub fn received_bytes(&self) -> u64 {
        match &self.end {
            End::Receiver { got, .. } if got.full() => self.io.cfg.size,
            End::Receiver { got, .. } => {
                let cfg = &self.io.cfg;
                let last = self.io.blocks - 1;
                u64::from(got.count) * cfg.block_len()
                    - if got.get(last) {
                        cfg.block_len() - cfg.len_of(last)
                    } else {
                        0
                    }
            }
            End::Sender { .. } => 0,
        }
    }
    /// Sender: the current gap between datagrams.
    pub fn interval(&self) -> Option<Duration> {
        match &self.end {
            End::Sender { pacer, .. } => Some(Duration::from_nanos(pacer.interval_ns as u64)),
            End::Receiver { .. } => None,
        }
    }

    /// The control connection is established: the end that opens the transfer
    /// sends its first message.
    pub fn control_connected(&mut self, now: Instant) {
        match &mut self.end {
            End::Sender { rules, pacer } => rules.connected(now, &mut self.io, pacer),
            End::Receiver { rules, .. } => rules.connected(now, &mut self.io),
        }
    }

    /// The next control frame to write, appended to `out`; false when there is none.
    pub fn poll_control(&mut self, out: &mut Vec<u8>) -> bool {
        match self.io.out.pop_front() {
            Some(m) => {
                m.emit(out);
                true
            }
            None => false,
        }
    }

    /// Bytes read from the control connection (any split of the stream). A frame
    /// that is not this protocol's is counted and the rest of the stream dropped,
    /// as a reader that lost its framing must.
    pub fn handle_control(&mut self, now: Instant, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let mut buf = core::mem::take(&mut self.partial);
        let mut at = 0;
        loop {
            match Message::parse(&buf[at..]) {
                Ok((m, n)) => {
                    at += n;
                    self.on_message(now, m);
                }
                Err(WireError::Truncated) => break,
                Err(_) => {
                    self.io.stats.bad_input += 1;
                    at = buf.len();
                    break;
                }
            }
        }
        buf.drain(..at);
        self.partial = buf;
    }

    fn on_message(&mut self, now: Instant, m: Message) {
        match &mut self.end {
            End::Sender { rules, pacer } => {
                if !rules.finished() {
                    rules.on_message(now, m, &mut self.io, pacer);
                    if rules.finished() {
                        self.io.events.push_back(Event::Finished);
                    }
                }
            }
            End::Receiver { rules, got, .. } => {
                if let Message::Start { size } = m {
                    if size != self.io.cfg.size {
                        self.io.stats.bad_input += 1;
                        return;
                    }
                }
                rules.on_message(now, m, &mut self.io, got)
            }
        }
    }
}

impl Io {
    fn new(cfg: BlastConfig) -> Self {
        Io {
            blocks: cfg.blocks(),
            cfg,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: BlastStats::default(),
        }
    }
}

impl Engine for BlastConnection {
    type Event = Event;
    const LAYER: Layer = Layer::Udp;

    /// A data datagram (at the receiver; anything else is counted and dropped).
    fn handle_datagram(&mut self, now: Instant, datagram: &[u8], wire_len: usize) {
        let End::Receiver {
            rules,
            got,
            completed,
            ..
        } = &mut self.end
        else {
            self.io.stats.bad_input += 1;
            return;
        };
        let Ok(h) = BlockRepr::parse(datagram) else {
            self.io.stats.bad_input += 1;
            return;
        };
        let payload = wire_len.saturating_sub(DATA_HEADER_LEN) as u64;
        if h.block >= self.io.blocks || payload != self.io.cfg.len_of(h.block) {
            self.io.stats.bad_input += 1;
            return;
        }
        self.io.stats.received += 1;
        let fresh = got.set(h.block);
        if !fresh {
            self.io.stats.duplicates += 1;
        }
        if *completed {
            return;
        }
        rules.on_block(now, h.block, fresh, &mut self.io, got);
        if got.full() {
            *completed = true;
            self.io.events.push_back(Event::Complete);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match &mut self.end {
            End::Sender { rules, .. } => {
                if rules.timeout().is_some_and(|t| t <= now) {
                    rules.on_timeout(now, &mut self.io);
                }
            }
            End::Receiver {
                rules,
                got,
                completed,
                ..
            } => {
                if !*completed && rules.timeout().is_some_and(|t| t <= now) {
                    rules.on_timeout(now, &mut self.io, got);
                }
            }
        }
    }

    /// Writes the block header only: the payload is elided (see [`Transmit`]).
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let End::Sender { rules, pacer } = &mut self.end else {
            return None;
        };
        if rules.finished() || !pacer.ready(now) || !rules.wants_to_send() {
            return None;
        }
        let (block, kind) = rules.next_block(now, &mut self.io, pacer)?;
        match kind {
            BlockKind::Original => self.io.stats.originals += 1,
            BlockKind::Retransmission => self.io.stats.retransmitted += 1,
        }
        pacer.sent(now);
        BlockRepr { kind, block }.emit(buf);
        Some(Transmit {
            written: DATA_HEADER_LEN,
            wire_len: DATA_HEADER_LEN + self.io.cfg.len_of(block) as usize,
            more: false,
        })
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.io.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.end {
            End::Sender { rules, pacer } => {
                if rules.finished() {
                    return None;
                }
                let send = rules.wants_to_send().then(|| pacer.at());
                match (send, rules.timeout()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            End::Receiver {
                rules, completed, ..
            } => (!completed).then(|| rules.timeout()).flatten(),
        }
    }
}
