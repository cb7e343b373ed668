//! Flows in a scenario, one loader per protocol (TCP, UDP, UDT, SCTP): hosts
//! resolved to nodes, congestion control and profiles by name, sizes and start times
//! checked against the run, each refusal naming `flow[i].key`.

use crate::app::{Arrivals, Files, SctpFlowSpec, TcpFlowSpec, UdpFlowSpec, UdtFlowSpec};
use crate::topology::{NodeKind, Topology};
use longhaul_model::units::{parse_rate, parse_size};
use longhaul_proto::cc::{ArUdtConfig, BbrConfig, SpwScope, UdtConfig as UdtCcConfig, UdtProfile};
use longhaul_proto::cc::{Avoidance, CcAlgorithm, HyStartMode};
use longhaul_proto::rtt::RtoConfig;
use longhaul_proto::sctp::SctpConfig;
use longhaul_proto::tcp::{AckPolicy, InitialWindow, TcpConfig};
use longhaul_proto::udt::{ArrivalClock, NakReport, RateControl, UdtConnConfig};
use longhaul_proto::{Duration, Instant};

use super::schema::{BbrFile, FilesFile, SctpFlowFile, TcpFlowFile, UdpFlowFile, UdtFlowFile};
use super::{Loader, ScenarioError, MAX_MESSAGE};

/// What a `bbr` table on a flow whose control is not BBR is told.
const BBR_ONLY: &str = "applies to cc = \"bbr\", \"bbr-v3\" or \"bbr-lh\" only";

impl Loader<'_> {
    pub(super) fn host(
        &self,
        topo: &Topology,
        key: &str,
        name: &str,
    ) -> Result<usize, ScenarioError> {
        match topo.node(name) {
            Some(n) if topo.nodes[n].kind == NodeKind::Host => Ok(n),
            Some(_) => Err(self.err(
                key,
                format!("`{name}` is a router; flows run between hosts"),
            )),
            None => {
                let hosts: Vec<&str> = topo
                    .nodes
                    .iter()
                    .filter(|n| n.kind == NodeKind::Host)
                    .map(|n| n.name.as_str())
                    .collect();
                Err(self.err(
                    key,
                    format!("no host named `{name}`; hosts are: {}", hosts.join(", ")),
                ))
            }
        }
    }

    pub(super) fn tcp_flow(
        &self,
        key: &str,
        t: &TcpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<TcpFlowSpec, ScenarioError> {
        let mut c = TcpConfig::profile(t.profile.as_deref().unwrap_or("default"))
            .map_err(|e| self.err(format!("{key}.profile"), format!("{e}")))?;
        if let Some(cc) = &t.cc {
            c.cc = cc
                .parse()
                .map_err(|e| self.err(format!("{key}.cc"), format!("{e}")))?;
        }
        if let Some(a) = &t.avoidance {
            let avoidance = match a.as_str() {
                "byte-counting" => Avoidance::ByteCounting,
                "per-ack" => Avoidance::PerAck,
                other => {
                    return Err(self.err(
                        format!("{key}.avoidance"),
                        format!("unknown `{other}`: use \"byte-counting\" or \"per-ack\""),
                    ))
                }
            };
            match &mut c.cc {
                CcAlgorithm::NewReno(cfg) => cfg.avoidance = avoidance,
                _ => {
                    return Err(self.err(
                        format!("{key}.avoidance"),
                        "applies to cc = \"newreno\" only",
                    ))
                }
            }
        }
        if let Some(h) = &t.hystart {
            let mode = match h.as_str() {
                "linux" => Some(HyStartMode::Linux),
                "rfc9406" => Some(HyStartMode::Rfc9406),
                "off" => None,
                other => {
                    return Err(self.err(
                        format!("{key}.hystart"),
                        format!("unknown `{other}`: use \"linux\" (Linux CUBIC's delay test), \"rfc9406\" (HyStart++) or \"off\""),
                    ))
                }
            };
            match &mut c.cc {
                CcAlgorithm::NewReno(cfg) => cfg.hystart = mode,
                CcAlgorithm::Cubic(cfg) => cfg.hystart = mode,
                _ => {
                    return Err(self.err(
                        format!("{key}.hystart"),
                        "applies to cc = \"cubic\" (\"linux\" by default) and \"newreno\" (\"off\" by default) only",
                    ))
                }
            }
        }
        match (&mut c.cc, &t.bbr) {
            (CcAlgorithm::Bbr(b), f) => {
                *b = self.bbr_knobs(*b, f.as_ref(), &format!("{key}.bbr"))?
            }
            (_, Some(_)) => return Err(self.err(format!("{key}.bbr"), BBR_ONLY)),
            (_, None) => {}
        }
        if let Some(mss) = t.mss {
            if !(64..=65000).contains(&mss) {
                return Err(self.err(format!("{key}.mss"), "must be from 64 to 65000 bytes"));
            }
            c.mss = mss;
        }
        if let Some(s) = t.sack {
            c.sack = s;
        }
        if let Some(ts) = &t.timestamps {
            c.timestamps = ts
                .parse()
                .map_err(|e| self.err(format!("{key}.timestamps"), format!("{e}")))?;
        }
        if let Some(n) = t.ack_every {
            if !(1..=64).contains(&n) {
                return Err(self.err(format!("{key}.ack_every"), "must be from 1 to 64 segments"));
            }
            c.ack = AckPolicy {
                every: n,
                delay: AckPolicy::DELAYED.delay,
                quick: c.ack.quick,
            };
        }
        if let Some(d) = &t.delayed_ack_timeout {
            c.ack.delay = self.time(&format!("{key}.delayed_ack_timeout"), d)?;
        }
        if let Some(r) = &t.rto {
            let formula = r
                .parse()
                .map_err(|e| self.err(format!("{key}.rto"), format!("{e}")))?;
            c.rto = RtoConfig::preset(formula);
        }
        if let Some(m) = &t.min_rto {
            let m = self.time(&format!("{key}.min_rto"), m)?;
            // On the formula `rto` chose, else RFC 6298's (whatever the profile).
            let base = if t.rto.is_some() {
                c.rto
            } else {
                RtoConfig::RFC6298
            };
            c.rto = RtoConfig { min_rto: m, ..base };
        }
        if let Some(iw) = &t.initial_window {
            c.initial_window = match iw {
                toml::Value::String(s) if s == "rfc3390" => InitialWindow::Rfc3390,
                toml::Value::String(s) if s == "iw10" => InitialWindow::Iw10,
                toml::Value::Integer(n) if (1..=1000).contains(n) => {
                    InitialWindow::Segments(*n as u32)
                }
                _ => {
                    return Err(self.err(
                        format!("{key}.initial_window"),
                        "use \"rfc3390\", \"iw10\" or a number of segments from 1 to 1000",
                    ))
                }
            };
        }
        let buf = |k: &str, v: &Option<String>, d: u64| -> Result<u64, ScenarioError> {
            match v {
                None => Ok(d),
                Some(s) => match parse_size(s) {
                    Ok(b) if b >= 2 * u64::from(c.mss) => Ok(b),
                    Ok(_) => Err(self.err(format!("{key}.{k}"), "must hold at least two segments")),
                    Err(m) => Err(self.err(format!("{key}.{k}"), m)),
                },
            }
        };
        c.recv_buffer_bytes = buf("recv_buffer", &t.recv_buffer, c.recv_buffer_bytes)?;
        c.send_buffer_bytes = buf("send_buffer", &t.send_buffer, c.send_buffer_bytes)?;
        if let Some(w) = t.window_scaling {
            c.window_scaling = w;
        }
        if let Some(d) = t.dscp {
            c.dscp = self.dscp(&format!("{key}.dscp"), d)?;
        }
        let files = match &t.files {
            Some(fl) => Some(self.files(&format!("{key}.files"), fl, u32::MAX)?),
            None => None,
        };
        let size = match (&t.size, files) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    format!("{key}.size"),
                    "give `size` or `files`, not both (files set the size)",
                ))
            }
            (None, Some(f)) => Some(f.total()),
            (None, None) => None,
            (Some(s), None) => match parse_size(s) {
                Ok(0) => {
                    return Err(self.err(
                        format!("{key}.size"),
                        "must be above zero; omit it for an endless backlog",
                    ))
                }
                Ok(n) => Some(n),
                Err(m) => return Err(self.err(format!("{key}.size"), m)),
            },
        };
        Ok(TcpFlowSpec {
            from,
            to,
            config: c,
            start,
            size,
            files,
        })
    }

    pub(super) fn files(
        &self,
        key: &str,
        f: &FilesFile,
        max_count: u32,
    ) -> Result<Files, ScenarioError> {
        if f.count == 0 || f.count > max_count {
            return Err(self.err(
                format!("{key}.count"),
                format!("must be from 1 to {max_count}"),
            ));
        }
        let size = match parse_size(&f.size) {
            Ok(0) => return Err(self.err(format!("{key}.size"), "must be above zero")),
            Ok(n) => n,
            Err(m) => return Err(self.err(format!("{key}.size"), m)),
        };
        let message = f.message.unwrap_or(1460);
        if !(1..=MAX_MESSAGE).contains(&message) {
            return Err(self.err(
                format!("{key}.message"),
                format!("must be from 1 to {MAX_MESSAGE} bytes"),
            ));
        }
        Ok(Files {
            count: f.count,
            size,
            message,
        })
    }

    pub(super) fn sctp_flow(
        &self,
        key: &str,
        u: &SctpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<SctpFlowSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let mut c =
            SctpConfig::profile(u.profile.as_deref().unwrap_or("rfc9260")).map_err(|e| {
                self.err(
                    k("profile"),
                    format!(
                        "{e} (\"linux-2.6.15\" is RFC 4960 + RFC 4460, the SCTP study's stack)"
                    ),
                )
            })?;
        if let Some(m) = u.mtu {
            if !(576..=65535).contains(&m) {
                return Err(self.err(k("mtu"), "must be from 576 to 65535 bytes"));
            }
            c.mtu = m;
        }
        if let Some(d) = &u.sack_delay {
            let d = self.time(&k("sack_delay"), d)?;
            if d > Duration::from_millis(500) {
                return Err(self.err(k("sack_delay"), "must be at most 500ms (RFC 9260 §6.2)"));
            }
            c.sack_delay = d;
        }
        if let Some(n) = u.sack_freq {
            if !(1..=64).contains(&n) {
                return Err(self.err(k("sack_freq"), "must be from 1 to 64 packets"));
            }
            c.sack_freq = n;
        }
        if let Some(n) = u.max_burst {
            if !(1..=1_000_000).contains(&n) {
                return Err(self.err(k("max_burst"), "must be from 1 to 1000000 packets"));
            }
            c.max_burst = n;
        }
        if let Some(b) = &u.recv_buffer {
            c.recv_buffer = match parse_size(b) {
                Ok(n) if (u64::from(c.mtu)..=u64::from(u32::MAX)).contains(&n) => n as u32,
                Ok(_) => {
                    return Err(self.err(
                        k("recv_buffer"),
                        "must hold at least one MTU and at most 4GB",
                    ))
                }
                Err(m) => return Err(self.err(k("recv_buffer"), m)),
            };
        }
        if let Some(m) = &u.min_rto {
            c.rto.min_rto = self.time(&k("min_rto"), m)?;
        }
        if let Some(b) = u.data_on_cookie_echo {
            c.data_on_cookie_echo = b;
        }
        if let Some(m) = &u.initial_rto {
            c.rto.initial_rto = self.time(&k("initial_rto"), m)?;
            if c.rto.initial_rto.is_zero() {
                return Err(self.err(k("initial_rto"), "must be above zero"));
            }
        }
        let files = match &u.files {
            Some(fl) => {
                if u.message.is_some() {
                    return Err(self.err(
                        k("message"),
                        "sets the endless backlog's message size; with `files`, write `files.message`",
                    ));
                }
                Some(self.files(&k("files"), fl, 65535)?)
            }
            None => None,
        };
        // One stream per file.
        c.streams = match (u.streams, files) {
            (Some(0), _) => return Err(self.err(k("streams"), "must be at least 1")),
            (Some(n), Some(f)) if u32::from(n) < f.count => {
                return Err(self.err(
                    k("streams"),
                    format!(
                        "{n} streams cannot carry {} files (one stream each)",
                        f.count
                    ),
                ))
            }
            (Some(n), _) => n,
            (None, Some(f)) => c.streams.max(f.count as u16),
            (None, None) => c.streams,
        };
        let message = u.message.unwrap_or(1460);
        if !(1..=MAX_MESSAGE).contains(&message) {
            return Err(self.err(
                k("message"),
                format!("must be from 1 to {MAX_MESSAGE} bytes"),
            ));
        }
        Ok(SctpFlowSpec {
            from,
            to,
            config: c,
            start,
            files,
            message,
        })
    }

    pub(super) fn udt_flow(
        &self,
        key: &str,
        u: &UdtFlowFile,
        from: usize,
        to: usize,
        start: Instant,
        seed: u64,
    ) -> Result<UdtFlowSpec, ScenarioError> {
        let k = |f: &str| format!("{key}.{f}");
        let profile = match u.profile.as_deref() {
            None => UdtProfile::default(),
            Some(p) => p
                .parse()
                .map_err(|e| self.err(k("profile"), format!("{e}")))?,
        };
        let udt = UdtCcConfig {
            profile,
            fix_inverted_fallback: u.fix_inverted_fallback.unwrap_or(false),
            seed,
        };
        let ar_keys = [
            ("w1", u.w1),
            ("w2", u.w2),
            ("alpha", u.alpha),
            ("beta", u.beta),
        ];
        let named = RateControl::from_name(u.cc.as_deref().unwrap_or("udt"), udt)
            .map_err(|e| self.err(k("cc"), format!("{e}")))?;
        let rate_control = match named {
            RateControl::Udt(_) => {
                if let Some((name, _)) = ar_keys.iter().find(|(_, v)| v.is_some()) {
                    return Err(self.err(k(name), "applies to cc = \"ar-udt\" only"));
                }
                if u.spw_scope.is_some() {
                    return Err(self.err(k("spw_scope"), "applies to cc = \"ar-udt\" only"));
                }
                if u.bbr.is_some() {
                    return Err(self.err(k("bbr"), BBR_ONLY));
                }
                RateControl::Udt(udt)
            }
            RateControl::ArUdt(_, d) => {
                if u.bbr.is_some() {
                    return Err(self.err(k("bbr"), BBR_ONLY));
                }
                let scope = match u.spw_scope.as_deref() {
                    None => SpwScope::default(),
                    Some(o) => o
                        .parse()
                        .map_err(|e| self.err(k("spw_scope"), format!("{e}")))?,
                };
                let a = ArUdtConfig {
                    w1: u.w1.unwrap_or(d.w1),
                    w2: u.w2.unwrap_or(d.w2),
                    alpha: u.alpha.unwrap_or(d.alpha),
                    beta: u.beta.unwrap_or(d.beta),
                    factors: d.factors,
                    scope,
                };
                if !(a.w1 >= 0.0 && a.w2 > a.w1 && (a.w1 + a.w2 - 1.0).abs() < 1e-9) {
                    return Err(self.err(
                        k("w2"),
                        "need 0 <= w1 < w2 and w1 + w2 = 1 (the paper's constraint)",
                    ));
                }
                // Each bound names the key that breaks it (a bad beta was reported as
                // `alpha`).
                if !(a.alpha > 0.0 && a.alpha <= 1.0) {
                    return Err(self.err(
                        k("alpha"),
                        format!("is {}; need 0 < alpha <= 1 < beta", a.alpha),
                    ));
                }
                if !(a.beta > 1.0 && a.beta.is_finite()) {
                    return Err(self.err(
                        k("beta"),
                        format!("is {}; need 0 < alpha <= 1 < beta, finite", a.beta),
                    ));
                }
                RateControl::ArUdt(udt, a)
            }
            RateControl::Bbr(b) => {
                if let Some((name, _)) = ar_keys.iter().find(|(_, v)| v.is_some()) {
                    return Err(self.err(k(name), "applies to cc = \"ar-udt\" only"));
                }
                for (name, set) in [
                    ("spw_scope", u.spw_scope.is_some()),
                    ("profile", u.profile.is_some()),
                    ("fix_inverted_fallback", u.fix_inverted_fallback.is_some()),
                ] {
                    if set {
                        return Err(self.err(
                            k(name),
                            "applies to UDT's own controls (cc = \"udt\" or \"ar-udt\"), not BBR",
                        ));
                    }
                }
                RateControl::Bbr(self.bbr_knobs(b, u.bbr.as_ref(), &k("bbr"))?)
            }
        };
        let nak_report = match u.nak_report.as_deref() {
            None | Some("once") => NakReport::Once,
            Some("periodic") => NakReport::Periodic,
            Some(o) => {
                return Err(self.err(
                    k("nak_report"),
                    format!(
                        "unknown `{o}`: use \"once\" (UDT4 4.11) or \"periodic\" (the draft's NAK timer, as in ns-2)"
                    ),
                ))
            }
        };
        let arrival_clock = match u.arrival_clock.as_deref() {
            None | Some("udt4") => ArrivalClock::Udt4,
            Some("ns") => ArrivalClock::Nanos,
            Some(o) => {
                return Err(self.err(
                    k("arrival_clock"),
                    format!(
                        "unknown `{o}`: use \"udt4\" (whole microseconds, as 4.11) or \"ns\" (nanoseconds, as `longhaul recv`)"
                    ),
                ))
            }
        };
        let mut c = UdtConnConfig {
            rate_control,
            nak_report,
            arrival_clock,
            ..UdtConnConfig::default()
        };
        if let Some(m) = u.mss {
            if !(longhaul_proto::udt::MIN_MSS..=9000).contains(&m) {
                return Err(self.err(
                    k("mss"),
                    format!(
                        "must be from {} to 9000 bytes (IP and UDP headers included)",
                        longhaul_proto::udt::MIN_MSS
                    ),
                ));
            }
            c.mss = m;
        }
        let pkts = |name: &str, v: Option<u32>, d: u32| match v {
            None => Ok(d),
            Some(n) if (2..=1_000_000).contains(&n) => Ok(n),
            Some(_) => Err(self.err(k(name), "must be from 2 to 1000000 packets")),
        };
        c.flight_flag_size = pkts("flight_flag_size", u.flight_flag_size, c.flight_flag_size)?;
        c.rcv_buf_pkts = pkts("recv_buffer_pkts", u.recv_buffer_pkts, c.rcv_buf_pkts)?;
        c.snd_buf_pkts = pkts("send_buffer_pkts", u.send_buffer_pkts, c.snd_buf_pkts)?;
        let size = match &u.size {
            None => None,
            Some(s) => match parse_size(s) {
                Ok(0) => {
                    return Err(self.err(
                        k("size"),
                        "must be above zero; omit it for an endless backlog",
                    ))
                }
                Ok(n) => Some(n),
                Err(m) => return Err(self.err(k("size"), m)),
            },
        };
        Ok(UdtFlowSpec {
            from,
            to,
            config: c,
            start,
            size,
        })
    }

    /// A flow or transfer that starts at or after the end of the run would never send
    /// (most likely a unit slip, "100s" for "100ms"): an error, not an empty result.
    /// The preset `b` with the knobs of a flow's `bbr` table (at `key`) over it.
    fn bbr_knobs(
        &self,
        mut b: BbrConfig,
        f: Option<&BbrFile>,
        key: &str,
    ) -> Result<BbrConfig, ScenarioError> {
        let Some(f) = f else { return Ok(b) };
        let k = |n: &str| format!("{key}.{n}");
        let fraction = |name: &str, v: Option<f64>, max: f64| match v {
            Some(x) if !(x.is_finite() && (0.0..=max).contains(&x)) => {
                Err(self.err(k(name), format!("is {x}; need a number from 0 to {max}")))
            }
            _ => Ok(v),
        };
        if let Some(t) = fraction("loss_threshold", f.loss_threshold, 1.0)? {
            b.loss_threshold = (t > 0.0).then_some(t);
        }
        if let Some(c) = fraction("min_rtt_confirm", f.min_rtt_confirm, 1.0)? {
            b.lh.min_rtt_confirm = c;
        }
        if let Some(q) = fraction("startup_queue_exit", f.startup_queue_exit, 10.0)? {
            b.lh.startup_queue_exit = (q > 0.0).then_some(q);
        }
        if let Some(q) = fraction("loss_needs_queue", f.loss_needs_queue, 10.0)? {
            // 0 is kept as set: a coupled group then leaves the gate off.
            b.lh.loss_needs_queue = Some(q);
        }
        if let Some(d) = f.drain_holds_bw {
            b.lh.drain_holds_bw = d;
        }
        if let Some(n) = f.nak_rtt {
            b.lh.nak_rtt = n;
        }
        if let Some(p) = f.pace_over_loss {
            b.lh.pace_over_loss = Some(p);
        }
        if let Some(h) = f.ack_hold {
            b.ack_hold = h;
        }
        if let Some(g) = fraction("startup_growth", f.startup_growth, 4.0)? {
            if g < 1.0 {
                return Err(self.err(
                    k("startup_growth"),
                    format!("is {g}; need 1 to 4 (1 is BBR's)"),
                ));
            }
            b.lh.startup_growth = g;
        }
        if let Some(m) = fraction("pacing_margin", f.pacing_margin, 0.5)? {
            b.lh.pacing_margin = m;
        }
        if let Some(g) = fraction("cwnd_gain", f.cwnd_gain, 4.0)? {
            if g < 1.0 {
                return Err(self.err(k("cwnd_gain"), format!("is {g}; need 1 to 4 (2 is BBR's)")));
            }
            b.lh.cwnd_gain = g;
        }
        Ok(b)
    }

    pub(super) fn starts_in_run(
        &self,
        key: &str,
        start: Instant,
        duration: Duration,
        written: &str,
    ) -> Result<(), ScenarioError> {
        if start < Instant::ZERO + duration {
            return Ok(());
        }
        Err(self.err(
            key,
            format!(
                "is not before the end of the run (`duration` = \"{written}\"), so it would \
                 never send: start it earlier or make the run longer"
            ),
        ))
    }

    pub(super) fn udp_flow(
        &self,
        key: &str,
        u: &UdpFlowFile,
        from: usize,
        to: usize,
        start: Instant,
    ) -> Result<UdpFlowSpec, ScenarioError> {
        let rate = parse_rate(&u.rate).map_err(|m| self.err(format!("{key}.rate"), m))?;
        let packet_size = u.packet_size.unwrap_or(1500);
        if !(29..=65535).contains(&packet_size) {
            return Err(self.err(
                format!("{key}.packet_size"),
                "must be from 29 to 65535 bytes (IP and UDP headers included)",
            ));
        }
        let arrivals = match u.arrivals.as_deref() {
            None | Some("cbr") => Arrivals::Cbr,
            Some("poisson") => Arrivals::Poisson,
            Some(o) => {
                return Err(self.err(
                    format!("{key}.arrivals"),
                    format!("unknown `{o}`: use \"cbr\" or \"poisson\""),
                ))
            }
        };
        let stop = match &u.stop {
            None => None,
            Some(s) => {
                let t = Instant::ZERO + self.time(&format!("{key}.stop"), s)?;
                if t <= start {
                    return Err(self.err(format!("{key}.stop"), "must be after `start`"));
                }
                Some(t)
            }
        };
        Ok(UdpFlowSpec {
            from,
            to,
            rate,
            packet_size,
            arrivals,
            start,
            stop,
            dscp: self.dscp(&format!("{key}.dscp"), u.dscp.unwrap_or(0))?,
        })
    }
}
