//! Limits that would silently cap a run: open files and ephemeral ports. They are checked before
//! anything is sent, and a run that cannot fit is refused with the largest size that would.

/// File descriptors kept free besides the connections: stdio, one epoll per thread, the probe's
/// socket, and a margin for the runtime (reading /proc, the binary, ...).
pub const FD_RESERVE: u64 = 16;

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 1024;
        }
        if rl.rlim_cur < rl.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: rl.rlim_max,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                rl.rlim_cur = rl.rlim_max;
            }
        }
        rl.rlim_cur
    }
}

/// The ephemeral port range (low, high), inclusive.
pub fn ephemeral_port_range() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|t| t.parse::<u32>());
    match (it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi))) if hi >= lo => Some((lo, hi)),
        _ => None,
    }
}

/// Refuse a run whose concurrent connections cannot all exist at once.
/// `probe_sockets`: extra connections to the same target (the echo probe).
pub fn check(
    connections: u64,
    threads: u64,
    probe_sockets: u64,
    fd_limit: u64,
    port_range: Option<(u32, u32)>,
    source_ips: u64,
) -> Result<(), String> {
    let reserve = FD_RESERVE + threads + probe_sockets;
    let max_by_fds = fd_limit.saturating_sub(reserve);
    if connections > max_by_fds {
        return Err(format!(
            "{connections} connections need more file descriptors than this process may open (limit {fd_limit}, \
             {reserve} kept for the tool itself): at most {max_by_fds} connections fit. Raise the limit with \
             `ulimit -n` (and the hard limit in /etc/security/limits.conf or the service's LimitNOFILE=), or use fewer connections"
        ));
    }
    if let Some((lo, hi)) = port_range {
        let ports = u64::from(hi - lo + 1);
        let addresses = source_ips.max(1);
        let max_by_ports = (ports * addresses).saturating_sub(probe_sockets);
        if connections > max_by_ports {
            return Err(format!(
                "{connections} connections to one target need more local ports than available: {ports} ephemeral ports \
                 ({lo}-{hi}) x {addresses} source address(es) allow at most {max_by_ports}. Widen the range \
                 (sysctl net.ipv4.ip_local_port_range=\"1024 65535\") or spread connections over more local \
                 addresses with --source-ips 127.0.1.1-127.0.1.N"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_limit_is_enforced_with_the_largest_possible_number() {
        assert!(check(19_000, 1, 1, 20_000, Some((32768, 60999)), 0).is_ok());
        let e = check(19_990, 1, 1, 20_000, Some((32768, 60999)), 0).unwrap_err();
        let max = 20_000 - (FD_RESERVE + 2);
        assert!(e.contains(&format!("at most {max} connections")), "{e}");
        assert!(e.contains("ulimit -n"), "{e}");
        assert!(check(max, 1, 1, 20_000, None, 0).is_ok());
        assert!(check(max + 1, 1, 1, 20_000, None, 0).is_err());
    }

    #[test]
    fn port_range_times_source_addresses() {
        // 1000 ports: 1000 connections fit with no probe, 999 with one.
        assert!(check(1000, 1, 0, 1 << 20, Some((2000, 2999)), 0).is_ok());
        let e = check(1000, 1, 1, 1 << 20, Some((2000, 2999)), 0).unwrap_err();
        assert!(
            e.contains("at most 999")
                && e.contains("--source-ips")
                && e.contains("ip_local_port_range"),
            "{e}"
        );
        assert!(check(2500, 1, 0, 1 << 20, Some((2000, 2999)), 3).is_ok());
        assert!(check(3001, 1, 0, 1 << 20, Some((2000, 2999)), 3).is_err());
    }

    #[test]
    fn raising_keeps_at_least_the_current_soft_limit() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain getrlimit on a local struct.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) };
        let now = raise_fd_limit();
        assert!(now >= before.rlim_cur);
        assert_eq!(now, before.rlim_max, "soft limit raised to the hard limit");
    }
}
