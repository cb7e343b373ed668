//! `longhaul bench loopback`: memory-to-memory UDT over loopback.
//! `longhaul bench emu`: the highest rate at which an emulator run stays valid.

use clap::{Args, Subcommand};
use longhaul_net::bench::loopback;
use longhaul_proto::udt::UdtConnConfig;

use crate::Failure;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// UDT connections over loopback, memory to memory (no disk, no network limit).
    Loopback(LoopbackArgs),
    /// The emulator's ceiling: one kernel CUBIC flow through `longhaul emu` at rising
    /// link rates; a run is valid with no host drops and timer lateness p99 under
    /// 100 µs.
    Emu(EmuBenchArgs),
}

#[derive(Debug, Args)]
struct EmuBenchArgs {
    /// Link rates to try, in order.
    #[arg(long, value_delimiter = ',', default_values_t = ["250Mbps".to_string(), "500Mbps".into(), "1Gbps".into(), "2Gbps".into(), "3Gbps".into()])]
    rates: Vec<String>,
    /// Round-trip time of the emulated path.
    #[arg(long, default_value = "20ms")]
    rtt: String,
    /// How long each run sends.
    #[arg(long, default_value = "6s")]
    duration: String,
    /// Runs per rate.
    #[arg(long, default_value_t = 2)]
    runs: u32,
    /// One packet per TUN read and write instead of TCP super-packets.
    #[arg(long)]
    no_offload: bool,
}

#[derive(Debug, Args)]
struct LoopbackArgs {
    /// Channel counts to measure, one run each (1 to 64).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 4],
          value_parser = clap::value_parser!(u8).range(1..=64))]
    channels: Vec<u8>,
    /// Megabytes each channel sends.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    megabytes: u64,
    /// UDT packet size, IP and UDP headers included (UDT4's MSS; 1500 by default,
    /// loopback carries up to 65535), 76 to 65000.
    #[arg(long, default_value_t = 1500,
          value_parser = clap::value_parser!(u32).range(76..=65_000))]
    mss: u32,
    /// Seal every datagram as `send`/`recv` do by default (AES-256-GCM per packet),
    /// to compare with the plain run.
    #[arg(long)]
    encrypt: bool,
}

pub fn run(args: BenchArgs) -> Result<(), Failure> {
    let a = match args.what {
        What::Loopback(a) => a,
        What::Emu(e) => {
            return crate::compare::bench(&e.rates, &e.rtt, &e.duration, e.runs, !e.no_offload)
        }
    };
    let cfg = UdtConnConfig {
        mss: a.mss,
        ..UdtConnConfig::default()
    };
    if let Ok(Some(w)) = longhaul_net::socket_buffer_warning(std::net::IpAddr::from([127, 0, 0, 1]))
    {
        eprintln!("warning: {w}");
    }
    outln!(
        "{:>9} {:>8} {:>8} {:>8} {:>13} {:>22} {:>22} {:>12} {:>22}",
        "channels",
        "Gb/s",
        "wall s",
        "CPU s",
        "CPU s per Gb",
        "CPU s/Gb snd, rcv",
        "CPU us/pkt snd, rcv",
        "retransmits",
        "syscalls/pkt snd, rcv"
    )?;
    for &c in &a.channels {
        let r = loopback(usize::from(c), a.megabytes * 1_000_000, cfg, a.encrypt)?;
        let (snd, rcv) = r.syscalls_per_packet();
        let (cpu_snd, cpu_rcv) = r.cpu_per_gbit_each();
        let (us_snd, us_rcv) = r.cpu_us_per_packet();
        outln!(
            "{:>9} {:>8.2} {:>8.2} {:>8.2} {:>13.3} {:>14.3}, {:>6.3} {:>14.2}, {:>6.2} {:>12} {:>14.2}, {:>5.2}",
            c,
            r.gbps(),
            r.seconds,
            r.cpu_seconds,
            r.cpu_per_gbit(),
            cpu_snd,
            cpu_rcv,
            us_snd,
            us_rcv,
            r.packets.1,
            snd,
            rcv
        )?;
    }
    Ok(())
}
