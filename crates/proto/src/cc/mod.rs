//! Congestion control: one file and one config struct per algorithm.
//!
//! TCP's controllers implement [`CongestionControl`]: NewReno, CUBIC, BBR; the
//! window-dependent AIMD family of [`Aimd`] (HighSpeed TCP, Scalable TCP); the
//! ports of Linux modules that share its segment arithmetic ([`SegmentWindow`]):
//! BIC, H-TCP, TCP-Illinois, Vegas and Westwood+; and FAST TCP, from its paper.
//! UDT's
//! rate-based ones (UDT, AR-UDT, and BBR through [`BbrUdt`]) implement
//! [`UdtRateControl`], whose events carry what UDT's receiver reports (receive rate,
//! link capacity, the ACK's RTT, the NAKs' loss lists). BBR is one model
//! ([`Bbr`], counting bytes) behind both: fed by the TCP engine's delivery-rate
//! samples ([`RateSampler`], kept only for a controller that asks), or by
//! [`BbrUdt`]'s reading of UDT's ACKs and NAKs. SCTP's
//! ([`SctpCc`]) is a plain struct: its rules hang on SCTP's own events (a SACK's bytes
//! and whether it moved the cumulative TSN, T3 expiry), which TCP's trait has no
//! words for.
//!
//! Controllers count in bytes and see the connection only through the event methods
//! below; loss detection, recovery and the retransmission timer belong to the engine.
//! Every event method defaults to a no-op, so an algorithm implements only what it
//! reacts to. [`AnyController`] dispatches statically (an enum, not a trait object),
//! which keeps the per-ACK path free of indirect calls.

mod aimd;
mod ar_udt;
mod bbr;
mod bbr_udt;
mod bic;
mod cubic;
mod delivery_rate;
mod fast;
mod highspeed;
mod htcp;
mod hystart;
mod illinois;
mod minmax;
mod new_reno;
mod scalable;
mod sctp;
mod segments;
mod udt;
mod vegas;
mod westwood;

pub use aimd::{Aimd, Response};
pub use ar_udt::{ArUdt, ArUdtConfig, SpwScope};
pub use bbr::{Bbr, BbrConfig, BbrMode, LhChanges};
pub use bbr_udt::{BbrGroup, BbrUdt, GROUP_LOSS_NEEDS_QUEUE};
pub use bic::Bic;
pub use cubic::{Cubic, CubicConfig};
pub use delivery_rate::{RateSample, RateSampler, SendState};
pub use fast::{Fast, FastConfig};
pub use highspeed::{HighSpeed, HighSpeedResponse};
pub use htcp::Htcp;
pub use hystart::{HyStart, HyStartMode, SlowStartStep};
pub use illinois::Illinois;
pub use minmax::WindowedMax;
pub use new_reno::{Avoidance, NewReno, NewRenoConfig, SlowStart};
pub use scalable::{Scalable, ScalableResponse};
pub use sctp::{SctpCc, SctpCcProfile};
pub use segments::{Rounds, SegmentWindow};
pub use udt::{
    Udt, UdtConfig, UdtInputs, UdtProfile, UdtRateControl, MIN_WINDOW_PKTS, SELF_CLOCK, SYN_US,
};
pub use vegas::Vegas;
pub use westwood::Westwood;

use crate::time::{Duration, Instant};

/// What an acknowledgement told the sender, for [`CongestionControl::on_ack`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AckSample {
    /// Bytes newly acknowledged (cumulatively or by SACK).
    pub bytes_acked: u64,
    /// Bytes in flight before this ACK was processed.
    pub prior_in_flight: u64,
    /// The smoothed RTT, if known.
    pub srtt: Option<Duration>,
    /// The RTT this ACK measured (the newest segment it acknowledged, never a
    /// retransmitted or SACKed one: Karn's rule), if any. Linux hands the same
    /// sample to a module's `pkts_acked`; the delay-based controllers (Vegas, FAST,
    /// Illinois, H-TCP's RTT bounds) read it.
    pub rtt: Option<Duration>,
}

impl AckSample {
    /// A sample without an RTT measurement.
    pub fn new(bytes_acked: u64, prior_in_flight: u64, srtt: Option<Duration>) -> Self {
        AckSample {
            bytes_acked,
            prior_in_flight,
            srtt,
            rtt: None,
        }
    }

    /// The sample with the RTT this ACK measured.
    pub fn with_rtt(self, rtt: Option<Duration>) -> Self {
        AckSample { rtt, ..self }
    }

    /// When the segment that gave [`rtt`](Self::rtt) was sent: an ACK whose
    /// segment left after a round began ends that round (Linux's
    /// `after(ack, snd_nxt at the round's start)`).
    pub fn sent_at(&self, now: Instant) -> Option<Instant> {
        self.rtt
            .map(|r| Instant::from_nanos(now.as_nanos().saturating_sub(r.as_nanos() as u64)))
    }
}

/// The congestion control interface every algorithm implements.
pub trait CongestionControl: core::fmt::Debug + Send {
    /// A packet of `bytes` bytes left; `in_flight` counts it.
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _in_flight: u64) {}
    /// Data was acknowledged outside loss recovery.
    fn on_ack(&mut self, _now: Instant, _ack: &AckSample) {}
    /// Loss was detected (fast retransmit): the start of a recovery episode.
    /// `in_flight` is FlightSize in RFC 5681's sense.
    fn on_loss(&mut self, _now: Instant, _in_flight: u64) {}
    /// The recovery episode ended (the cumulative ACK passed the recovery point).
    fn on_recovery_end(&mut self, _now: Instant) {}
    /// The retransmission timer expired: a new loss episode.
    fn on_timeout(&mut self, _now: Instant, _in_flight: u64) {}
    /// The retransmission timer expired inside a loss episode already answered: for
    /// a segment the timer has already resent (RFC 5681 §3.1 then holds ssthresh
    /// constant), or during a fast recovery, which set ssthresh for this episode
    /// (Linux's `tcp_enter_loss` keeps it then too). The window collapses as on
    /// [`on_timeout`](Self::on_timeout), ssthresh stays. The default does what
    /// `on_timeout` does, for controllers without a window.
    fn on_timeout_in_episode(&mut self, now: Instant, in_flight: u64) {
        self.on_timeout(now, in_flight);
    }
    /// The congestion window in bytes.
    fn window(&self) -> u64;
    /// The slow-start threshold in bytes.
    fn ssthresh(&self) -> u64;
    /// Whether the controller is in slow start.
    fn in_slow_start(&self) -> bool {
        self.window() < self.ssthresh()
    }
    /// The pacing rate, bytes per second, if the controller paces; `None` for
    /// window-only control.
    fn pacing_rate(&self) -> Option<f64> {
        None
    }
    /// Whether the controller reads delivery-rate samples; the engine then keeps
    /// per-segment state for them and calls [`on_rate_sample`](Self::on_rate_sample).
    fn wants_rate_samples(&self) -> bool {
        false
    }
    /// An ACK delivered or lost data (in recovery too): its delivery-rate sample,
    /// the bytes delivered so far, and the bytes in flight after it.
    fn on_rate_sample(
        &mut self,
        _now: Instant,
        _rs: &RateSample,
        _delivered: u64,
        _in_flight: u64,
    ) {
    }
}

/// Which algorithm a connection uses, and its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CcAlgorithm {
    /// RFC 5681 / RFC 6582.
    NewReno(NewRenoConfig),
    /// RFC 9438.
    Cubic(CubicConfig),
    /// BBR (Linux's `tcp_bbr`, with the options of [`BbrConfig`]).
    Bbr(BbrConfig),
    /// HighSpeed TCP (RFC 3649).
    HighSpeed,
    /// Scalable TCP (Kelly 2003, as Linux's `tcp_scalable`).
    Scalable,
    /// BIC TCP (Xu, Harfoush, Rhee 2004, as Linux's `tcp_bic`).
    Bic,
    /// H-TCP (Leith, Shorten 2004, as Linux's `tcp_htcp`).
    Htcp,
    /// TCP-Illinois (Liu, Başar, Srikant 2006, as Linux's `tcp_illinois`).
    Illinois,
    /// TCP Vegas (Brakmo, Peterson 1995, as Linux's `tcp_vegas`).
    Vegas,
    /// FAST TCP (Jin, Wei, Low 2004).
    Fast(FastConfig),
    /// TCP Westwood+ (Grieco, Mascolo 2004, as Linux's `tcp_westwood`).
    Westwood,
}

/// One of the built-in controllers, dispatched by `match`.
#[derive(Debug, Clone)]
pub enum AnyController {
    /// NewReno.
    NewReno(NewReno),
    /// CUBIC.
    Cubic(Cubic),
    /// BBR.
    Bbr(Box<Bbr>),
    /// HighSpeed TCP.
    HighSpeed(HighSpeed),
    /// Scalable TCP.
    Scalable(Scalable),
    /// BIC TCP.
    Bic(Bic),
    /// H-TCP.
    Htcp(Htcp),
    /// TCP-Illinois.
    Illinois(Illinois),
    /// TCP Vegas.
    Vegas(Vegas),
    /// FAST TCP.
    Fast(Fast),
    /// TCP Westwood+.
    Westwood(Westwood),
}

impl AnyController {
    /// Builds the controller `algo` at `now` for a sender with maximum segment size
    /// `smss` and initial window `initial_window` bytes.
    pub fn new(algo: CcAlgorithm, smss: u64, initial_window: u64, now: Instant) -> Self {
        match algo {
            CcAlgorithm::NewReno(c) => {
                AnyController::NewReno(NewReno::new(c, smss, initial_window, now))
            }
            CcAlgorithm::Cubic(c) => AnyController::Cubic(Cubic::new(c, smss, initial_window, now)),
            CcAlgorithm::Bbr(c) => {
                AnyController::Bbr(Box::new(Bbr::new(c, smss, initial_window, now)))
            }
            CcAlgorithm::HighSpeed => {
                AnyController::HighSpeed(Aimd::new(HighSpeedResponse, smss, initial_window))
            }
            CcAlgorithm::Scalable => {
                AnyController::Scalable(Aimd::new(ScalableResponse, smss, initial_window))
            }
            CcAlgorithm::Bic => AnyController::Bic(Bic::new(smss, initial_window)),
            CcAlgorithm::Htcp => AnyController::Htcp(Htcp::new(smss, initial_window, now)),
            CcAlgorithm::Illinois => {
                AnyController::Illinois(Illinois::new(smss, initial_window, now))
            }
            CcAlgorithm::Vegas => AnyController::Vegas(Vegas::new(smss, initial_window, now)),
            CcAlgorithm::Fast(c) => AnyController::Fast(Fast::new(c, smss, initial_window, now)),
            CcAlgorithm::Westwood => AnyController::Westwood(Westwood::new(smss, initial_window)),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyController::NewReno($c) => $e,
            AnyController::Cubic($c) => $e,
            AnyController::Bbr($c) => $e,
            AnyController::HighSpeed($c) => $e,
            AnyController::Scalable($c) => $e,
            AnyController::Bic($c) => $e,
            AnyController::Htcp($c) => $e,
            AnyController::Illinois($c) => $e,
            AnyController::Vegas($c) => $e,
            AnyController::Fast($c) => $e,
            AnyController::Westwood($c) => $e,
        }
    };
}

impl CongestionControl for AnyController {
    fn on_packet_sent(&mut self, now: Instant, bytes: u64, in_flight: u64) {
        dispatch!(self, c => c.on_packet_sent(now, bytes, in_flight))
    }
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        dispatch!(self, c => c.on_ack(now, ack))
    }
    fn on_loss(&mut self, now: Instant, in_flight: u64) {
        dispatch!(self, c => c.on_loss(now, in_flight))
    }
    fn on_recovery_end(&mut self, now: Instant) {
        dispatch!(self, c => c.on_recovery_end(now))
    }
    fn on_timeout(&mut self, now: Instant, in_flight: u64) {
        dispatch!(self, c => c.on_timeout(now, in_flight))
    }
    fn on_timeout_in_episode(&mut self, now: Instant, in_flight: u64) {
        dispatch!(self, c => c.on_timeout_in_episode(now, in_flight))
    }
    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }
    fn ssthresh(&self) -> u64 {
        dispatch!(self, c => c.ssthresh())
    }
    fn pacing_rate(&self) -> Option<f64> {
        dispatch!(self, c => c.pacing_rate())
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }
    fn wants_rate_samples(&self) -> bool {
        dispatch!(self, c => c.wants_rate_samples())
    }
    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample, delivered: u64, in_flight: u64) {
        dispatch!(self, c => c.on_rate_sample(now, rs, delivered, in_flight))
    }
}
