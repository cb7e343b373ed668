//! Early hosts: a host of TCP receivers that takes each packet at the moment it is
//! offered to the link into it, ahead of the clock (which hosts can, and why the run
//! is the same, is in `fast`). Here is what keeps such a host in step with
//! everything else: its timers fire in time order before each packet it takes, and
//! the observations it runs past read what it had at their instants.

use std::cmp::Reverse;

use crate::app::Flow;
use longhaul_proto::tcp::TcpConnection;
use longhaul_proto::{Duration, Instant};

use super::Simulation;

impl Simulation {
    /// Early hosts take the packets sent to them during the last event.
    #[inline(always)]
    pub(super) fn take_early_arrivals(&mut self) {
        let mut i = 0;
        while let Some(&(at, node, pkt)) = self.early_pending.get(i) {
            i += 1;
            let node = node as usize;
            if at >= self.host_wake[node] {
                self.catch_up(node, at);
            }
            self.consume(at, node, pkt);
        }
        self.early_pending.clear();
    }

    /// Brings early host `node` up to just before a packet arriving at `at`: its
    /// timers due by then fire, and the observations it is about to run past are
    /// recorded, all in time order. A timer due at `at` itself fires before the
    /// packet (with an event per arrival, whichever was scheduled first would go
    /// first; this is a choice as good as that one); an observation at `at` itself
    /// needs no record, since observers go last at their instant.
    #[cold]
    pub(super) fn catch_up(&mut self, node: usize, at: Instant) {
        loop {
            let timer = self.earliest_host_timer(node);
            let obs = self.host_next_obs[node];
            match timer {
                Some((d, f)) if d <= at && d <= obs => self.fire_early_timer(d, f),
                _ if obs < at => self.record_observation(node, obs),
                _ => {
                    // Nothing due by `at`: the host next needs a look at its next
                    // observation or its earliest timer.
                    self.host_wake[node] = timer.map_or(obs, |(d, _)| d.min(obs));
                    return;
                }
            }
        }
    }

    /// Early host `node`'s earliest armed receiver timer (the first flow's, on a
    /// tie), with the entries before it that are no longer armed dropped.
    fn earliest_host_timer(&mut self, node: usize) -> Option<(Instant, usize)> {
        let timers = self.host_timers[node].as_mut()?;
        while let Some(&Reverse((d, f))) = timers.peek() {
            match &self.flows[f as usize] {
                Flow::Tcp(t) if t.timer_at[1] == Some(d) => return Some((d, f as usize)),
                _ => timers.pop(),
            };
        }
        None
    }

    /// A receiver timer was armed for `d` at early host `node`, by flow `f`.
    #[inline]
    pub(super) fn host_timer_armed(&mut self, node: usize, d: Instant, f: usize) {
        if let Some(timers) = &mut self.host_timers[node] {
            timers.push(Reverse((d, f as u32)));
            self.host_wake[node] = self.host_wake[node].min(d);
        }
    }

    /// Fires the receiver timer of flow `f`, due at `d`, ahead of the clock (the
    /// event already scheduled for it will find it no longer armed for `d`).
    #[cold]
    pub(super) fn fire_early_timer(&mut self, d: Instant, f: usize) {
        if let Some(timers) = &mut self.host_timers[self.flow_ends[f].1] {
            timers.pop(); // this timer's entry: `catch_up` read it at the top
        }
        // Armed for `d`: `catch_up` read it there.
        self.expire::<TcpConnection>(d, f, 1);
    }

    /// Records what observation `obs` will read of early host `node`'s receivers,
    /// and moves the host on to the next observation.
    #[cold]
    pub(super) fn record_observation(&mut self, node: usize, obs: Instant) {
        for e in &self.nodes[node].endpoints {
            let f = e.flow as usize;
            self.snaps[f].push_back((obs, self.flows[f].delivered_bytes()));
        }
        self.host_next_obs[node] = self.next_observation_after(obs);
    }

    /// The first sample or trace after `t` (they fall on multiples of their
    /// intervals).
    pub(super) fn next_observation_after(&self, t: Instant) -> Instant {
        let after = |every: Duration| {
            let every = (every.as_nanos() as u64).max(1);
            Instant::from_nanos((t.as_nanos() / every + 1).saturating_mul(every))
        };
        let s = after(self.cfg.sample_interval);
        self.cfg.trace_interval.map_or(s, |ti| s.min(after(ti)))
    }

    /// Flow `f`'s delivered bytes as an observation at `now` sees them: recorded, if
    /// its receiver is an early host that has run past `now`.
    pub(super) fn delivered_as_of(&mut self, f: usize, now: Instant) -> u64 {
        let q = &mut self.snaps[f];
        while q.front().is_some_and(|&(t, _)| t < now) {
            q.pop_front();
        }
        match q.front() {
            Some(&(t, d)) if t == now => d,
            _ => self.flows[f].delivered_bytes(),
        }
    }
}
