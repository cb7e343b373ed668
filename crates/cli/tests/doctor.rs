//! `longhaul doctor` on fake hosts (`--sysroot`): what it reports, the fixes it
//! gives and its exit status.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

/// The settings of a fake host; `tuned()` is a host ready for 10 Gb/s x 100 ms.
struct Fake {
    rmem_max: &'static str,
    wmem_max: &'static str,
    tcp_rmem: &'static str,
    tcp_wmem: &'static str,
    cc: &'static str,
    available: &'static str,
    backlog: &'static str,
    mtu: &'static str,
    ethtool: Option<&'static str>,
    governor: &'static str,
    nofile: &'static str,
    free: &'static str,
}

const OFFLOADS_ON: &str = "Features for eth0:\nrx-checksumming: on\ntcp-segmentation-offload: on\n\ttx-tcp-segmentation: on\ngeneric-segmentation-offload: on\ngeneric-receive-offload: on\n";

impl Fake {
    fn tuned() -> Self {
        Fake {
            rmem_max: "268435456",
            wmem_max: "268435456",
            tcp_rmem: "4096\t131072\t268435456",
            tcp_wmem: "4096\t16384\t268435456",
            cc: "htcp",
            available: "reno cubic htcp",
            backlog: "250000",
            mtu: "9000",
            ethtool: Some(OFFLOADS_ON),
            governor: "performance",
            nofile: "65536",
            free: "5000000000000",
        }
    }

    /// Linux's defaults: 208 KiB socket buffers, Reno.
    fn untuned() -> Self {
        Fake {
            rmem_max: "212992",
            wmem_max: "212992",
            tcp_rmem: "4096 131072 6291456",
            tcp_wmem: "4096 16384 4194304",
            cc: "reno",
            available: "reno cubic",
            backlog: "1000",
            ..Fake::tuned()
        }
    }

    fn write(&self) -> TempDir {
        let d = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        };
        put("proc/sys/net/core/rmem_max", self.rmem_max);
        put("proc/sys/net/core/wmem_max", self.wmem_max);
        put("proc/sys/net/ipv4/tcp_rmem", self.tcp_rmem);
        put("proc/sys/net/ipv4/tcp_wmem", self.tcp_wmem);
        put("proc/sys/net/ipv4/tcp_congestion_control", self.cc);
        put(
            "proc/sys/net/ipv4/tcp_available_congestion_control",
            self.available,
        );
        put("proc/sys/net/core/netdev_max_backlog", self.backlog);
        put(
            "proc/self/limits",
            &format!("Limit                     Soft Limit           Hard Limit           Units\nMax open files            {}                 1048576              files", self.nofile),
        );
        put("sys/class/net/eth0/mtu", self.mtu);
        for cpu in ["cpu0", "cpu1"] {
            put(
                &format!("sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor"),
                self.governor,
            );
        }
        put(
            "cmd/ip_route_get_192.0.2.7",
            "192.0.2.7 via 10.0.0.1 dev eth0 src 10.0.0.2 uid 0\n    cache",
        );
        put(
            "cmd/ip_route_show_default",
            "default via 10.0.0.1 dev eth0 proto static",
        );
        put("cmd/ping_-V", "ping from iputils 20240117");
        let size = self.mtu.parse::<u32>().unwrap() - 28;
        put(
            &format!("cmd/ping_-c_1_-W_2_-M_do_-s_{size}_192.0.2.7"),
            "1 packets transmitted, 1 received",
        );
        if let Some(k) = self.ethtool {
            put("cmd/ethtool_-k_eth0", k);
        }
        put("cmd/free_bytes", self.free);
        d
    }
}

fn doctor(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .arg("doctor")
        .arg("--sysroot")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

/// The JSON report and the exit status.
fn report(fake: &Fake, args: &[&str]) -> (Value, i32) {
    let d = fake.write();
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = doctor(d.path(), &all);
    let text = String::from_utf8_lossy(&o.stdout);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (v, o.status.code().unwrap())
}

/// The finding for `check`.
fn finding<'a>(v: &'a Value, check: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {v:#}"))
}

#[test]
fn linux_defaults_limit_a_10_gbps_100_ms_path_with_the_fixes() {
    let (v, code) = report(&Fake::untuned(), &["--rate", "10Gbps", "--rtt", "100ms"]);
    assert_eq!(code, 1);
    assert_eq!(v["bdp_bytes"], 125_000_000);
    for key in ["net.core.rmem_max", "net.core.wmem_max"] {
        let f = finding(&v, key);
        assert_eq!(f["status"], "limits", "{f:#}");
        // 2 x BDP, rounded up to a power of two.
        assert_eq!(f["fix"], format!("sysctl -w {key}=268435456"));
    }
    let f = finding(&v, "net.ipv4.tcp_rmem");
    assert_eq!(f["status"], "limits");
    assert_eq!(
        f["fix"],
        "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 268435456\""
    );
    let f = finding(&v, "net.ipv4.tcp_congestion_control");
    assert_eq!(f["status"], "limits", "{f:#}");
    // The best control the kernel offers.
    assert_eq!(f["fix"], "sysctl -w net.ipv4.tcp_congestion_control=cubic");
    assert_eq!(
        finding(&v, "net.core.netdev_max_backlog")["status"],
        "limits"
    );
    assert_eq!(v["limiting"], 6);
}

#[test]
fn a_tuned_host_passes_and_exits_0() {
    let (v, code) = report(
        &Fake::tuned(),
        &["192.0.2.7", "--dir", "/data", "--size", "1TB"],
    );
    for f in v["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "ok", "{f:#}");
    }
    assert_eq!(finding(&v, "route MTU")["value"], "9000 (eth0)");
    assert_eq!(finding(&v, "path MTU")["value"], "9000 passes");
    assert_eq!(v["limiting"], 0);
    assert_eq!(code, 0);
}

#[test]
fn the_same_host_is_enough_for_a_slower_shorter_path() {
    // 208 KiB holds twice a 10 Mb/s x 20 ms path's window (25 KB) several times
    // over, and below 1 Gb/s the default backlog is enough.
    let fake = Fake {
        cc: "cubic",
        ..Fake::untuned()
    };
    let (v, code) = report(&fake, &["--rate", "10Mbps", "--rtt", "20ms"]);
    assert_eq!(v["limiting"], 0, "{v:#}");
    assert_eq!(code, 0);
}

#[test]
fn offloads_governor_mtu_files_and_space_are_reported() {
    let fake = Fake {
        mtu: "1500",
        ethtool: Some("Features for eth0:\ntcp-segmentation-offload: off\ngeneric-segmentation-offload: off\ngeneric-receive-offload: on\n"),
        governor: "powersave",
        nofile: "256",
        free: "100000000000",
        ..Fake::tuned()
    };
    let (v, code) = report(&fake, &["192.0.2.7", "--dir", "/data", "--size", "1TB"]);
    assert_eq!(code, 1);
    let gso = finding(&v, "GSO (eth0)");
    assert_eq!(gso["status"], "limits");
    assert_eq!(gso["fix"], "ethtool -K eth0 gso on");
    assert_eq!(finding(&v, "GRO (eth0)")["status"], "ok");
    assert_eq!(finding(&v, "TSO (eth0)")["status"], "advice");
    assert_eq!(finding(&v, "CPU governor")["status"], "advice");
    assert_eq!(finding(&v, "route MTU")["status"], "advice");
    assert_eq!(
        finding(&v, "route MTU")["fix"],
        "ip link set dev eth0 mtu 9000"
    );
    assert_eq!(finding(&v, "open files (soft)")["status"], "limits");
    let space = finding(&v, "free space (/data)");
    assert_eq!(space["status"], "limits");
    assert_eq!(space["value"], "100.0 GB");
    // GSO, open files, free space.
    assert_eq!(v["limiting"], 3);
}

#[test]
fn what_cannot_be_read_is_unknown_not_ok() {
    let fake = Fake {
        ethtool: None,
        ..Fake::tuned()
    };
    let (v, code) = report(&fake, &["192.0.2.99"]);
    // No route to .99 in the fake: the MTU is unknown; the default route's device
    // is not used for a peer without a route.
    assert_eq!(finding(&v, "route MTU")["status"], "unknown");
    assert_eq!(code, 0);
    let (v, _) = report(&fake, &[]);
    let f = finding(&v, "offloads");
    assert_eq!(f["status"], "unknown");
    assert_eq!(f["fix"], "apt-get install ethtool");
}

#[test]
fn a_path_one_socket_cannot_hold_asks_for_channels() {
    let (v, _) = report(&Fake::untuned(), &["--rate", "100Gbps", "--rtt", "200ms"]);
    let f = finding(&v, "net.core.rmem_max");
    // 2 x 2.5 GB against Linux's 2 GiB cap on one buffer: three channels.
    assert_eq!(f["fix"], "sysctl -w net.core.rmem_max=2147483647");
    assert!(
        f["why"]
            .as_str()
            .unwrap()
            .contains("at least 3 parallel channels"),
        "{f:#}"
    );
}

#[test]
fn the_table_names_each_limit_and_its_command() {
    let d = Fake::untuned().write();
    let o = doctor(d.path(), &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("net.core.rmem_max"), "{text}");
    assert!(
        text.contains("fix: sysctl -w net.core.rmem_max=268435456"),
        "{text}"
    );
    assert!(text.contains("/etc/sysctl.d/90-longhaul.conf"), "{text}");
    assert!(text.contains("6 settings limit the path"), "{text}");
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let d = Fake::tuned().write();
    for (args, needle) in [
        (&["--rate", "fast"][..], "--rate"),
        (&["--rtt", "0ms"][..], "--rtt"),
        (&["--dir", "/x", "--size", "lots"][..], "--size"),
    ] {
        let o = doctor(d.path(), args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_longhaul"))
        .args(["doctor", "--sysroot", "/nonexistent/longhaul"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
