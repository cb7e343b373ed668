//! Delivery-rate estimation: how fast the path delivered data over the last round
//! trip, measured on every acknowledgement from what the sender remembers of each
//! packet when it left (Cheng, Cardwell, Hassas Yeganeh, Jacobson,
//! draft-cheng-iccrg-delivery-rate-estimation-02; Linux's `tcp_rate.c`).
//!
//! The engine stores the [`SendState`] that [`RateSampler::on_send`] returns beside
//! each packet it sends (again on each retransmission), and when packets are
//! acknowledged hands them to [`RateSampler::on_delivered`] between
//! [`begin_ack`](RateSampler::begin_ack) and [`finish_ack`](RateSampler::finish_ack).
//! The sampler counts bytes: a packet-counting engine passes its packet size.
//!
//! > The delivery rate sample is computed over the interval between the "send" of the
//! > most recently sent packet that was delivered and its acknowledgement, taking the
//! > longer of the send and ACK intervals so that ACK compression cannot inflate it
//! > (draft §3.3, paraphrased).

use crate::time::{Duration, Instant};

/// What the sampler remembers of a packet when it is sent (draft §3.2, "P.delivered",
/// "P.delivered_time", "P.first_sent_time", "P.is_app_limited", "P.sent_time").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendState {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    sent_time: Instant,
    is_app_limited: bool,
}

impl SendState {
    /// When the packet was (last) sent.
    pub fn sent_time(&self) -> Instant {
        self.sent_time
    }

    /// Whether the sender was application-limited when the packet left.
    pub fn is_app_limited(&self) -> bool {
        self.is_app_limited
    }
}

/// One acknowledgement's sample (draft §3.3, "rs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSample {
    /// Bytes delivered over [`interval`](Self::interval).
    pub delivered: u64,
    /// The interval the rate is measured over; zero when the sample is not valid.
    pub interval: Duration,
    /// The connection's delivered count when the most recently sent of the newly
    /// delivered packets left ("rs.prior_delivered"): BBR counts round trips by it.
    pub prior_delivered: u64,
    /// Whether that packet left while the sender was application-limited: the rate
    /// then says what the application offered, not what the path can carry.
    pub is_app_limited: bool,
    /// Bytes newly delivered by this acknowledgement.
    pub newly_acked: u64,
    /// Bytes newly found lost since the last sample.
    pub newly_lost: u64,
    /// Bytes in flight before this acknowledgement.
    pub prior_in_flight: u64,
    /// The round-trip time this acknowledgement measured, if the engine has one.
    pub rtt: Option<Duration>,
    /// Whether any packet was found lost since the last sample.
    pub losses: bool,
}

impl RateSample {
    /// The delivery rate, bytes per second, if the sample is valid.
    pub fn rate(&self) -> Option<f64> {
        (self.delivered > 0 && !self.interval.is_zero())
            .then(|| self.delivered as f64 / self.interval.as_secs_f64())
    }
}

/// The connection-wide side of the estimator (draft §3.1: "C.delivered",
/// "C.delivered_time", "C.first_sent_time", "C.app_limited").
#[derive(Debug, Clone, Default)]
pub struct RateSampler {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// The delivered count after which the sender is no longer application-limited;
    /// 0 when it is not.
    app_limited: u64,
    lost: u64,
    lost_reported: u64,
    /// The sample being built: the state of the most recently sent delivered packet.
    newest: Option<SendState>,
    newly_acked: u64,
}

impl RateSampler {
    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes found lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// A packet leaves at `now` with `in_flight` bytes already in flight; returns
    /// what to store beside it (draft §3.2, "SendPacket").
    pub fn on_send(&mut self, now: Instant, in_flight: u64) -> SendState {
        // With nothing in flight, the send interval starts now: an idle period must
        // not stretch the first sample's interval.
        if in_flight == 0 {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        SendState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            sent_time: now,
            is_app_limited: self.app_limited != 0,
        }
    }

    /// The sender has nothing to send though its window would allow it, with
    /// `in_flight` bytes in flight: samples until that data is delivered measure the
    /// application, not the path (draft §3.4, "C.app_limited").
    pub fn on_app_limited(&mut self, in_flight: u64) {
        self.app_limited = (self.delivered + in_flight).max(1);
    }

    /// `bytes` were found lost.
    pub fn on_lost(&mut self, bytes: u64) {
        self.lost += bytes;
    }

    /// Starts the sample of one acknowledgement.
    pub fn begin_ack(&mut self) {
        self.newest = None;
        self.newly_acked = 0;
    }

    /// A packet of `bytes`, sent with `state`, is delivered at `now` (draft §3.3,
    /// "UpdateRateSample").
    pub fn on_delivered(&mut self, now: Instant, state: &SendState, bytes: u64) {
        self.delivered += bytes;
        self.delivered_time = now;
        self.newly_acked += bytes;
        // The most recently sent packet is the one with the largest delivered count
        // at its send (ties: the later send).
        let newer = self.newest.is_none_or(|n| {
            state.delivered > n.delivered
                || (state.delivered == n.delivered && state.sent_time >= n.sent_time)
        });
        if newer {
            self.newest = Some(*state);
            // The next send interval starts at this packet's send.
            self.first_sent_time = state.sent_time;
        }
    }

    /// Ends the sample at `now`: `prior_in_flight` was in flight before the ACK,
    /// `rtt` is the RTT the engine measured from it if any, and samples over an
    /// interval shorter than `min_rtt` are not trusted (draft §3.3: they would
    /// mean the ACKs were compressed).
    pub fn finish_ack(
        &mut self,
        now: Instant,
        prior_in_flight: u64,
        rtt: Option<Duration>,
        min_rtt: Option<Duration>,
    ) -> RateSample {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let newly_lost = self.lost - self.lost_reported;
        self.lost_reported = self.lost;
        let mut rs = RateSample {
            newly_acked: self.newly_acked,
            newly_lost,
            losses: newly_lost > 0,
            prior_in_flight,
            rtt,
            ..RateSample::default()
        };
        let Some(p) = self.newest.take() else {
            return rs;
        };
        rs.prior_delivered = p.delivered;
        rs.is_app_limited = p.is_app_limited;
        let send_elapsed = p.sent_time.saturating_duration_since(p.first_sent_time);
        let ack_elapsed = now.saturating_duration_since(p.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        if min_rtt.is_some_and(|m| interval < m) || interval.is_zero() {
            return rs;
        }
        rs.delivered = self.delivered - p.delivered;
        rs.interval = interval;
        rs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// Hand-worked: ten 1000-byte packets leave 1 ms apart from t=0, each
    /// acknowledged 100 ms after it left. Every snapshot holds delivered 0 and
    /// delivered_time 0 (the first send set it), so the ACK of packet 9 at 109 ms
    /// measures 10 000 bytes over max(send 9 ms, ACK 109 ms).
    #[test]
    fn a_first_flight_measures_from_its_start() {
        let mut s = RateSampler::default();
        let states: Vec<_> = (0..10).map(|i| s.on_send(ms(i), i * 1000)).collect();
        let mut last = RateSample::default();
        for (i, st) in states.iter().enumerate() {
            let t = ms(100 + i as u64);
            s.begin_ack();
            s.on_delivered(t, st, 1000);
            last = s.finish_ack(t, 10_000 - i as u64 * 1000, None, None);
        }
        assert_eq!(last.delivered, 10_000);
        assert_eq!(last.interval, Duration::from_millis(109));
        assert_eq!(last.prior_delivered, 0);
    }

    /// A steady stream, one 1000-byte packet per ms, each acknowledged 100 ms after
    /// it left: once the pipe is full every sample is exactly 100 packets over
    /// 100 ms, 1 MB/s, whichever packet it ends on.
    #[test]
    fn a_steady_stream_measures_its_rate_exactly() {
        let mut s = RateSampler::default();
        let mut sent = std::collections::VecDeque::new();
        for t in 0..1000u64 {
            // ACK first (the packet sent 100 ms ago), then send.
            if t >= 100 {
                let st = sent.pop_front().unwrap();
                s.begin_ack();
                s.on_delivered(ms(t), &st, 1000);
                let rs = s.finish_ack(ms(t), 100_000, None, None);
                if t >= 300 {
                    assert_eq!(rs.delivered, 100_000, "t={t}");
                    assert_eq!(rs.interval, Duration::from_millis(100), "t={t}");
                    assert_eq!(rs.rate(), Some(1e6));
                }
            }
            let in_flight = sent.len() as u64 * 1000;
            sent.push_back(s.on_send(ms(t), in_flight));
        }
    }

    /// ACK compression cannot inflate the rate: ten packets sent 10 ms apart and all
    /// acknowledged at once measure the send rate, not the ACK burst's.
    #[test]
    fn compressed_acks_measure_the_send_rate() {
        let mut s = RateSampler::default();
        let first = s.on_send(ms(0), 0);
        s.begin_ack();
        s.on_delivered(ms(50), &first, 1000);
        s.finish_ack(ms(50), 1000, None, None);
        let states: Vec<_> = (0..10).map(|i| s.on_send(ms(50 + 10 * i), 1000)).collect();
        s.begin_ack();
        for st in &states {
            s.on_delivered(ms(200), st, 1000);
        }
        let rs = s.finish_ack(ms(200), 10_000, None, None);
        // The newest packet left at 140 ms with delivered 1000, delivered_time 50:
        // ack interval 150 ms, send interval 140-50 = 90 ms; 10 000 bytes / 150 ms.
        assert_eq!(rs.delivered, 10_000);
        assert_eq!(rs.interval, Duration::from_millis(150));
    }

    /// A sample over less than the minimum RTT is discarded; the app-limited mark
    /// rides on packets sent while it holds and clears once that data is delivered.
    #[test]
    fn short_intervals_are_invalid_and_app_limited_clears() {
        let mut s = RateSampler::default();
        s.on_app_limited(0);
        let a = s.on_send(ms(0), 0);
        s.begin_ack();
        s.on_delivered(ms(5), &a, 1000);
        let rs = s.finish_ack(ms(5), 1000, None, Some(Duration::from_millis(10)));
        assert_eq!(rs.rate(), None, "5 ms < min RTT 10 ms");
        assert!(rs.is_app_limited);
        assert_eq!(rs.newly_acked, 1000);
        let b = s.on_send(ms(10), 0);
        s.begin_ack();
        s.on_delivered(ms(30), &b, 1000);
        let rs = s.finish_ack(ms(30), 1000, None, Some(Duration::from_millis(10)));
        assert!(
            !rs.is_app_limited,
            "the mark cleared once 1 byte past it was delivered"
        );
        assert_eq!(rs.rate(), Some(1000.0 / 0.020));
        s.on_lost(1500);
        s.begin_ack();
        let rs = s.finish_ack(ms(31), 0, None, None);
        assert_eq!((rs.newly_lost, rs.losses), (1500, true));
    }
}
