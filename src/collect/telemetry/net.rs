//! Network byte counters from `/proc/net/dev`: how much a node sent and received while it
//! trained, so a user sees when the link, not the cores, limits a cluster's speedup.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One interface's counters (or their growth over a span).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

/// The interfaces of a `/proc/net/dev` text: after two header lines, `name: rx_bytes packets
/// errs drop fifo frame compressed multicast tx_bytes …`. Lines that do not read are left out.
pub fn parse(text: &str) -> Vec<Interface> {
    text.lines()
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let fields: Vec<u64> = counters
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            Some(Interface {
                name: name.trim().to_string(),
                rx_bytes: *fields.first()?,
                tx_bytes: *fields.get(8)?,
            })
        })
        .collect()
}

/// The counters under `root` (`/`, or a fixture tree); empty where they cannot be read.
pub fn read(root: &Path) -> Vec<Interface> {
    std::fs::read_to_string(root.join("proc/net/dev"))
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// Growth per interface from `before` to `after` (interfaces in both; a counter that went back,
/// as a re-created interface's does, counts from zero).
pub fn delta(before: &[Interface], after: &[Interface]) -> Vec<Interface> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.name == a.name)?;
            let grown = |now: u64, then: u64| if now >= then { now - then } else { now };
            Some(Interface {
                name: a.name.clone(),
                rx_bytes: grown(a.rx_bytes, b.rx_bytes),
                tx_bytes: grown(a.tx_bytes, b.tx_bytes),
            })
        })
        .collect()
}

/// Which interfaces carry a cluster's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Every endpoint is on this machine: the loopback interface.
    Loopback,
    /// Everything but loopback.
    External,
}

/// Whether `host` (a name or an address, IPv6 with or without brackets) is this machine's
/// loopback.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The interfaces that carry traffic between `endpoints` (`address:port`).
pub fn counted(endpoints: &[String]) -> Counted {
    let loopback = |e: &String| is_loopback(e.rsplit_once(':').map_or(e.as_str(), |(h, _)| h));
    if !endpoints.is_empty() && endpoints.iter().all(loopback) {
        Counted::Loopback
    } else {
        Counted::External
    }
}

/// Bytes received and sent over the interfaces `counted` names.
pub fn total(interfaces: &[Interface], counted: &Counted) -> (u64, u64) {
    interfaces
        .iter()
        .filter(|i| (i.name == "lo") == (*counted == Counted::Loopback))
        .fold((0, 0), |(rx, tx), i| (rx + i.rx_bytes, tx + i.tx_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000      50    0    0    0     0          0         0     7000      60    0    0    0     0       0          0
 wlan0: garbled
";

    #[test]
    fn counters_are_read_and_garbled_lines_left_out() {
        let i = parse(DEV);
        assert_eq!(i.len(), 2);
        assert_eq!(i[1].name, "eth0");
        assert_eq!((i[1].rx_bytes, i[1].tx_bytes), (5000, 7000));
        assert!(parse("").is_empty());
        assert!(parse("eth0: 1 2 3").is_empty());
    }

    #[test]
    fn growth_counts_loopback_only_for_a_cluster_on_one_machine() {
        let before = parse(DEV);
        let mut after = before.clone();
        after[0].rx_bytes += 300;
        after[1].tx_bytes += 50;
        after[1].rx_bytes = 10; // re-created: counts from zero
        let d = delta(&before, &after);
        let local = counted(&["127.0.0.1:1".into(), "localhost:2".into()]);
        assert_eq!(local, Counted::Loopback);
        assert_eq!(total(&d, &local), (300, 0));
        let boards = counted(&["127.0.0.1:1".into(), "pi-2:2".into()]);
        assert_eq!(boards, Counted::External);
        assert_eq!(total(&d, &boards), (10, 50));
        assert_eq!(counted(&["[::1]:5".into()]), Counted::Loopback);
    }
}
