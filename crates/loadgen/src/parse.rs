//! Parsers for the small value languages of the command line: durations, CPU lists, address lists.
//! Each error names what was wrong and what is accepted, because it ends up verbatim on stderr.

use std::net::IpAddr;
use std::time::Duration;

/// `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds (`2.5`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale_s) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| {
        format!("invalid duration '{text}': use e.g. 500ms, 10s, 2m, 1h or a number of seconds like 2.5")
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "invalid duration '{text}': it must be a finite, non-negative time"
        ));
    }
    let seconds = value * scale_s;
    if seconds > 30.0 * 86400.0 {
        return Err(format!("invalid duration '{text}': longer than 30 days"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `1`, `0,2`, `2-5`, `0,2-3`: CPU numbers in the order given (duplicates allowed, thread i takes
/// entry i modulo the length).
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let bad =
            || format!("invalid CPU list '{text}': use numbers and ranges like 1 or 0,2 or 2-5");
        if part.is_empty() {
            return Err(bad());
        }
        if let Some((lo, hi)) = part.split_once('-') {
            let lo: usize = lo.trim().parse().map_err(|_| bad())?;
            let hi: usize = hi.trim().parse().map_err(|_| bad())?;
            if hi < lo {
                return Err(format!(
                    "invalid CPU range '{part}' in '{text}': the end is below the start"
                ));
            }
            if hi - lo >= 4096 {
                return Err(format!("invalid CPU range '{part}': more than 4096 CPUs"));
            }
            cpus.extend(lo..=hi);
        } else {
            cpus.push(part.parse().map_err(|_| bad())?);
        }
    }
    Ok(cpus)
}

/// `127.0.0.2,127.0.0.3`, a range `127.0.1.1-127.0.1.20` (IPv4, last address included), or a mix.
pub fn parse_ip_list(text: &str) -> Result<Vec<IpAddr>, String> {
    const MAX_ADDRESSES: u32 = 65536;
    let mut ips = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let bad = || {
            format!("invalid address list '{text}': use addresses like 127.0.0.2,127.0.0.3 or a range 127.0.1.1-127.0.1.20")
        };
        if part.is_empty() {
            return Err(bad());
        }
        if let Some((lo, hi)) = part.split_once('-') {
            let lo: std::net::Ipv4Addr = lo.trim().parse().map_err(|_| bad())?;
            let hi: std::net::Ipv4Addr = hi.trim().parse().map_err(|_| bad())?;
            let (lo, hi) = (u32::from(lo), u32::from(hi));
            if hi < lo {
                return Err(format!(
                    "invalid address range '{part}': the end is below the start"
                ));
            }
            if hi - lo >= MAX_ADDRESSES {
                return Err(format!(
                    "invalid address range '{part}': more than {MAX_ADDRESSES} addresses"
                ));
            }
            ips.extend((lo..=hi).map(|a| IpAddr::V4(a.into())));
        } else {
            ips.push(part.parse().map_err(|_| bad())?);
        }
    }
    Ok(ips)
}

/// A size in bytes: a plain integer, or with a binary suffix `k`/`KiB`, `m`/`MiB`, `g`/`GiB`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (number, scale) = [
        ("kib", 1u64 << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
    ]
    .iter()
    .find_map(|(suffix, scale)| lower.strip_suffix(suffix).map(|n| (n.to_string(), *scale)))
    .unwrap_or((lower.clone(), 1));
    let value: u64 = number.trim().parse().map_err(|_| {
        format!("invalid byte count '{text}': use a whole number like 32768 or 32k, 512KiB, 1m")
    })?;
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("invalid byte count '{text}': too large"))
}

/// A latency in µs as people read it: 850us, 1.25ms, 2.00s.
pub fn fmt_us(us: u64) -> String {
    match us {
        0..=999 => format!("{us}us"),
        1000..=999_999 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

/// Bytes in binary units: 1.50 MiB.
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

/// A share of something: a percentage (`0.1%`) or a fraction (`0.001`), between 0 and 100%; the
/// value returned is the fraction. The error starts with the text quoted, for the caller to prefix
/// with the option it came from.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (t, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|x| x / scale)
        .filter(|x| (0.0..=1.0).contains(x))
        .ok_or_else(|| {
            format!("'{text}': give a percentage like 0.1% or a fraction like 0.001, between 0 and 100%")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "ten", "10x", "-1s", "nan", "inf", "1e9h", "5 minutes"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("invalid duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0,2").unwrap(), vec![0, 2]);
        assert_eq!(parse_cpu_list("2-5").unwrap(), vec![2, 3, 4, 5]);
        assert_eq!(parse_cpu_list("0, 3-4").unwrap(), vec![0, 3, 4]);
        for bad in ["", "a", "1,", "3-1", "1-", "-1", "0-99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn ip_lists() {
        let ips = parse_ip_list("127.0.1.1-127.0.1.3,::1").unwrap();
        let text: Vec<String> = ips.iter().map(|i| i.to_string()).collect();
        assert_eq!(text, ["127.0.1.1", "127.0.1.2", "127.0.1.3", "::1"]);
        assert_eq!(parse_ip_list("127.0.0.2").unwrap().len(), 1);
        for bad in [
            "",
            "127.0.0.300",
            "127.0.0.5-127.0.0.1",
            "localhost",
            "10.0.0.0-10.2.0.0",
        ] {
            assert!(parse_ip_list(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("32768").unwrap(), 32768);
        assert_eq!(parse_bytes("32k").unwrap(), 32768);
        assert_eq!(parse_bytes("512KiB").unwrap(), 512 * 1024);
        assert_eq!(parse_bytes("1m").unwrap(), 1 << 20);
        assert!(parse_bytes("1.5k").is_err());
        assert!(parse_bytes("99999999999g").is_err());
    }
}
