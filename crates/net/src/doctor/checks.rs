//! The checks, one function each, in the order the report lists them.

use super::{bytes_text, Finding, Host, Status, Target};

/// Linux caps a socket buffer at `INT_MAX` bytes.
const SOCKET_BUFFER_CAP: u64 = i32::MAX as u64;

/// Every check for `target`.
pub fn all(host: &dyn Host, target: &Target) -> Vec<Finding> {
    let mut f = Vec::new();
    for key in ["net.core.rmem_max", "net.core.wmem_max"] {
        f.push(buffer_max(host, target, key));
    }
    for key in ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"] {
        f.push(tcp_autotuning(host, target, key));
    }
    f.push(congestion_control(host, target));
    f.push(backlog(host, target));
    let dev = route_device(host, target);
    if let Some(peer) = &target.peer {
        f.extend(mtu(host, target, peer, dev.as_deref()));
    }
    f.extend(offloads(host, dev.as_deref()));
    f.push(governor(host));
    f.push(open_files(host));
    if let Some(dir) = &target.dir {
        f.push(free_space(host, target, dir));
    }
    f
}

/// `/proc/sys/...` for a sysctl key.
fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

fn finding(check: &str, value: String, needs: String, status: Status) -> Finding {
    Finding {
        check: check.to_string(),
        value,
        needs,
        status,
        why: String::new(),
        fix: None,
    }
}

fn unreadable(check: &str, what: &str) -> Finding {
    Finding {
        why: format!("could not read {what}"),
        ..finding(check, "?".into(), String::new(), Status::Unknown)
    }
}

/// The socket buffer a path needs: twice its bandwidth-delay product (Linux
/// gives about half of a buffer to the window, the rest to overhead, under the
/// default `tcp_adv_win_scale`), within the kernel's cap.
fn buffer_need(target: &Target) -> u64 {
    (2 * target.bdp()).min(SOCKET_BUFFER_CAP)
}

/// The value a fix sets: the need rounded up to a power of two (at least 1 MiB),
/// within the kernel's cap.
fn buffer_setting(target: &Target) -> u64 {
    buffer_need(target)
        .max(1 << 20)
        .next_power_of_two()
        .min(SOCKET_BUFFER_CAP)
}

/// The cap note when one socket cannot hold the path.
fn cap_note(target: &Target) -> String {
    if 2 * target.bdp() > SOCKET_BUFFER_CAP {
        let n = (2 * target.bdp()).div_ceil(SOCKET_BUFFER_CAP);
        format!(" One socket cannot hold this path (Linux caps a buffer at 2 GiB): use at least {n} parallel channels (`--channels`).")
    } else {
        String::new()
    }
}

/// `net.core.rmem_max` / `wmem_max`: the most a socket may ask for.
fn buffer_max(host: &dyn Host, target: &Target, key: &str) -> Finding {
    let Some(v) = host
        .read(&sysctl_path(key))
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return unreadable(key, &sysctl_path(key));
    };
    let need = buffer_need(target);
    let mut f = finding(
        key,
        v.to_string(),
        format!(">= {need} (2 x BDP)"),
        Status::Ok,
    );
    if v < need {
        f.status = Status::Limits;
        f.why = format!(
            "a socket may buffer at most {}, which holds {:.1} ms at this rate: a window of one BDP ({}) cannot fit, so one channel of UDT or TCP tops out near {:.0} Mb/s on this RTT.{}",
            bytes_text(v),
            v as f64 * 8.0 / target.rate.as_bps() as f64 * 1e3,
            bytes_text(target.bdp()),
            v as f64 / 2.0 * 8.0 / target.rtt.as_secs_f64() / 1e6,
            cap_note(target),
        );
        f.fix = Some(format!("sysctl -w {key}={}", buffer_setting(target)));
    }
    f
}

/// `net.ipv4.tcp_rmem` / `tcp_wmem`: autotuning's "min default max".
fn tcp_autotuning(host: &dyn Host, target: &Target, key: &str) -> Finding {
    let fields: Option<Vec<u64>> = host
        .read(&sysctl_path(key))
        .map(|s| {
            s.split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<Vec<u64>>>()
        })
        .and_then(|v| v.filter(|v| v.len() == 3));
    let Some(v) = fields else {
        return unreadable(key, &sysctl_path(key));
    };
    let need = buffer_need(target);
    let mut f = finding(
        key,
        format!("{} {} {}", v[0], v[1], v[2]),
        format!("max >= {need}"),
        Status::Ok,
    );
    if v[2] < need {
        f.status = Status::Limits;
        f.why = format!(
            "TCP's autotuning grows a socket's buffer to at most {}, so a TCP flow's window stays near {} against a BDP of {}: at most about {:.0} Mb/s per flow on this RTT.{}",
            bytes_text(v[2]),
            bytes_text(v[2] / 2),
            bytes_text(target.bdp()),
            v[2] as f64 / 2.0 * 8.0 / target.rtt.as_secs_f64() / 1e6,
            cap_note(target),
        );
        let set = buffer_setting(target);
        f.fix = Some(format!("sysctl -w {key}=\"{} {} {set}\"", v[0], v[1]));
    }
    f
}

/// TCP's default congestion control, against those the kernel offers.
fn congestion_control(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "net.ipv4.tcp_congestion_control";
    let Some(cc) = host.read(&sysctl_path(CHECK)).map(|s| s.trim().to_string()) else {
        return unreadable(CHECK, &sysctl_path(CHECK));
    };
    let available = host
        .read(&sysctl_path("net.ipv4.tcp_available_congestion_control"))
        .unwrap_or_default();
    let available: Vec<&str> = available.split_whitespace().collect();
    let mut f = finding(
        CHECK,
        format!("{cc} (available: {})", available.join(" ")),
        "a high-speed control: bbr, htcp or cubic".into(),
        Status::Ok,
    );
    if matches!(
        cc.as_str(),
        "reno" | "newreno" | "vegas" | "westwood" | "veno"
    ) {
        let w = target.bdp() as f64 / 1448.0;
        f.status = Status::Limits;
        f.why = format!(
            "{cc} grows by one segment per RTT: after a single loss at this path's window ({w:.0} segments) it takes {w2:.0} RTTs, {mins:.1} minutes, to fill the path again, and random loss of 1e-5 already holds it to a few percent of it (Mathis et al. 1997).",
            w2 = w / 2.0,
            mins = w / 2.0 * target.rtt.as_secs_f64() / 60.0,
        );
        let pick = ["bbr", "htcp", "cubic"]
            .into_iter()
            .find(|c| available.contains(c));
        f.fix = Some(match pick {
            Some(c) => format!("sysctl -w {CHECK}={c}"),
            None => format!("modprobe tcp_bbr && sysctl -w {CHECK}=bbr"),
        });
    }
    f
}

/// `net.core.netdev_max_backlog`: packets a CPU may queue from the NIC.
fn backlog(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "net.core.netdev_max_backlog";
    let Some(v) = host
        .read(&sysctl_path(CHECK))
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return unreadable(CHECK, &sysctl_path(CHECK));
    };
    // The values of ESnet's host-tuning pages for 10 Gb/s and for faster hosts.
    let bps = target.rate.as_bps();
    let need = if bps > 10_000_000_000 {
        250_000
    } else if bps > 1_000_000_000 {
        30_000
    } else {
        1000
    };
    let mut f = finding(CHECK, v.to_string(), format!(">= {need}"), Status::Ok);
    if v < need {
        f.status = Status::Limits;
        f.why = format!(
            "a burst of more than {v} packets from the NIC before the kernel drains them is dropped on this host, which the sender reads as congestion; at {} that is {:.2} ms of packets.",
            super::rate_text(bps),
            v as f64 * 1500.0 * 8.0 / bps as f64 * 1e3,
        );
        f.fix = Some(format!("sysctl -w {CHECK}={need}"));
    }
    f
}

/// The device of the route to the peer (or of the default route).
fn route_device(host: &dyn Host, target: &Target) -> Option<String> {
    let out = match &target.peer {
        Some(p) => host.run(&["ip", "route", "get", p])?,
        None => host.run(&["ip", "route", "show", "default"])?,
    };
    word_after(&out, "dev")
}

/// The word after `key` in `text`.
fn word_after(text: &str, key: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == key)?;
    words.next().map(str::to_string)
}

/// The route's MTU, and whether full-size packets pass the path unfragmented.
fn mtu(host: &dyn Host, target: &Target, peer: &str, dev: Option<&str>) -> Vec<Finding> {
    let Some(dev) = dev else {
        return vec![Finding {
            why: format!("`ip route get {peer}` found no route"),
            fix: Some(format!(
                "ip route get {peer}   # check the address, then the routing table"
            )),
            ..finding("route MTU", "?".into(), String::new(), Status::Unknown)
        }];
    };
    let Some(mtu) = host
        .read(&format!("/sys/class/net/{dev}/mtu"))
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        return vec![unreadable(
            "route MTU",
            &format!("/sys/class/net/{dev}/mtu"),
        )];
    };
    let mut out = Vec::new();
    let mut f = finding(
        "route MTU",
        format!("{mtu} ({dev})"),
        "9000 at 10 Gb/s and above".into(),
        Status::Ok,
    );
    if mtu < 9000 && target.rate.as_bps() >= 10_000_000_000 {
        f.status = Status::Advice;
        f.why = format!(
            "at {} every packet costs the hosts CPU; jumbo frames (MTU 9000) carry six times the data per packet. Both ends and every hop must carry them.",
            super::rate_text(target.rate.as_bps())
        );
        f.fix = Some(format!("ip link set dev {dev} mtu 9000"));
    }
    out.push(f);
    // A full-size packet with Don't Fragment: does the path carry the route's MTU?
    // ICMP payload: the MTU less IPv4's and ICMP's headers (65507 at most).
    let size = (mtu as usize).saturating_sub(28).min(65_507).to_string();
    let probe = [
        "ping",
        "-c",
        "1",
        "-W",
        "2",
        "-M",
        "do",
        "-s",
        size.as_str(),
        peer,
    ];
    let mut p = finding(
        "path MTU",
        String::new(),
        format!("{mtu} end to end"),
        Status::Ok,
    );
    match host.run(&probe) {
        Some(_) => p.value = format!("{mtu} passes"),
        None if host.run(&["ping", "-V"]).is_none() => {
            p.value = "not probed".into();
            p.status = Status::Unknown;
            p.why = "`ping` did not run, so the path was not probed with full-size packets".into();
            p.fix = Some("apt-get install iputils-ping".into());
        }
        None => {
            p.value = "not confirmed".into();
            p.status = Status::Unknown;
            p.why = format!(
                "a {mtu}-byte packet with Don't Fragment got no reply from {peer}: either the peer does not answer ping, or a hop carries less (then packets of this size vanish; lower the MTU to what passes)."
            );
            p.fix = Some(format!(
                "tracepath -n {peer}   # shows the path MTU hop by hop"
            ));
        }
    }
    out.push(p);
    out
}

/// GSO, GRO and TSO of the route's device.
fn offloads(host: &dyn Host, dev: Option<&str>) -> Vec<Finding> {
    let Some(dev) = dev else {
        return Vec::new();
    };
    let Some(k) = host.run(&["ethtool", "-k", dev]) else {
        return vec![Finding {
            why: format!("`ethtool -k {dev}` did not run"),
            fix: Some("apt-get install ethtool".into()),
            ..finding("offloads", "?".into(), String::new(), Status::Unknown)
        }];
    };
    let state = |feature: &str| {
        k.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{feature}:")))
            .map(|v| v.trim().starts_with("on"))
    };
    let mut out = Vec::new();
    for (name, feature, short, limits) in [
        ("GSO", "generic-segmentation-offload", "gso", true),
        ("GRO", "generic-receive-offload", "gro", true),
        ("TSO", "tcp-segmentation-offload", "tso", false),
    ] {
        let check = format!("{name} ({dev})");
        let Some(on) = state(feature) else {
            out.push(unreadable(
                &check,
                &format!("{feature} in `ethtool -k {dev}`"),
            ));
            continue;
        };
        let mut f = finding(
            &check,
            if on { "on" } else { "off" }.into(),
            "on".into(),
            Status::Ok,
        );
        if !on {
            f.status = if limits {
                Status::Limits
            } else {
                Status::Advice
            };
            f.why = format!(
                "without {name} the kernel handles every packet one by one{}: a core then tops out well below 10 Gb/s.",
                if short == "gro" { " on receive" } else { " on send" }
            );
            f.fix = Some(format!("ethtool -K {dev} {short} on"));
        }
        out.push(f);
    }
    out
}

/// The CPU frequency governor.
fn governor(host: &dyn Host) -> Finding {
    const CHECK: &str = "CPU governor";
    let govs: Vec<String> = host
        .cpus()
        .iter()
        .filter_map(|c| {
            host.read(&format!(
                "/sys/devices/system/cpu/{c}/cpufreq/scaling_governor"
            ))
        })
        .map(|s| s.trim().to_string())
        .collect();
    if govs.is_empty() {
        return Finding {
            why: "no cpufreq in /sys: the CPUs run at a fixed frequency (or a hypervisor sets it); nothing to do here".into(),
            ..finding(CHECK, "not exposed".into(), "performance".into(), Status::Unknown)
        };
    }
    let mut distinct = govs.clone();
    distinct.sort();
    distinct.dedup();
    let mut f = finding(CHECK, distinct.join(", "), "performance".into(), Status::Ok);
    if distinct.iter().any(|g| g != "performance") {
        f.status = Status::Advice;
        f.why = "a power-saving governor lets cores slow down between bursts, and packets arriving at a slowed core wait (ESnet's guide sets `performance`).".into();
        f.fix = Some("cpupower frequency-set -g performance".into());
    }
    f
}

/// The soft limit on open files (the session's sockets and files).
fn open_files(host: &dyn Host) -> Finding {
    const CHECK: &str = "open files (soft)";
    let soft = host.read("/proc/self/limits").and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("Max open files"))?;
        line["Max open files".len()..]
            .split_whitespace()
            .next()
            .map(str::to_string)
    });
    let Some(soft) = soft else {
        return unreadable(CHECK, "/proc/self/limits");
    };
    let need = 1024;
    let mut f = finding(CHECK, soft.clone(), format!(">= {need}"), Status::Ok);
    if soft.parse::<u64>().is_ok_and(|n| n < need) {
        f.status = Status::Limits;
        f.why = "a transfer of a directory keeps a socket per channel and files open while it writes them; a low limit ends it with `Too many open files`.".into();
        f.fix = Some("ulimit -n 65536   # this shell; LimitNOFILE= in a systemd unit, nofile in /etc/security/limits.conf for good".into());
    }
    f
}

/// Free space where the data goes.
fn free_space(host: &dyn Host, target: &Target, dir: &std::path::Path) -> Finding {
    let check = format!("free space ({})", dir.display());
    let Some(free) = host.free_bytes(dir) else {
        return unreadable(&check, &format!("the file system of {}", dir.display()));
    };
    let needs = target.size.map_or_else(
        || "room for the data".to_string(),
        |s| format!(">= {}", bytes_text(s)),
    );
    let mut f = finding(&check, bytes_text(free), needs, Status::Ok);
    if let Some(size) = target.size.filter(|&s| free < s) {
        f.status = Status::Limits;
        f.why = format!(
            "{} free, {} to write: the transfer would stop when the disk fills.",
            bytes_text(free),
            bytes_text(size)
        );
        f.fix = Some(format!(
            "df -h {}   # free space there, or receive into another directory",
            dir.display()
        ));
    }
    f
}
