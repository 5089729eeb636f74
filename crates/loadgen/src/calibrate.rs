//! `netarena-load calibrate`: two fixed yardsticks a run measures on its own machine, so that its
//! figures can be read relative to them (docs/reports.md, "Calibration"):
//!
//! - `cpu`: a fixed CPU-bound loop, timed in µs per unit. Native code with no allocation, I/O or
//!   system call inside the unit, so it measures the core (clock, pipeline, steal), not an
//!   interpreter's or allocator's mood; the same source in every netarena version that keeps
//!   `CPU_UNIT_VERSION`.
//! - `serve`: a fixed reference HTTP/1.1 server (one blocking thread per connection, a constant
//!   response), the other half of the reference pair: netarena-load against it gives the machine's
//!   cost of one request on loopback, for a client and a server that are the same code everywhere.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Instant;

use serde::Serialize;

/// Bumped whenever the unit's work changes: figures of different versions do not compare.
pub const CPU_UNIT_VERSION: u32 = 1;
/// Steps in one unit: about 6 ms on the 2.6 GHz EPYC VM it was written on, long enough that a
/// timer's resolution does not matter, short enough that 25 units fit in well under a second.
pub const CPU_UNIT_STEPS: u64 = 1 << 20;
/// The reference server's one response, whatever was asked.
pub const REFERENCE_BODY: &[u8] = b"Hello, World!";

/// One unit of fixed work: a dependent chain of multiply, xor-shift, a data-dependent branch and a
/// lookup in a table that stays in L1. Each step needs the previous one's result, so the compiler
/// cannot vectorise or skip it, and the answer (returned, and checked by the tests) is a pure
/// function of `seed`.
pub fn cpu_unit(seed: u64) -> u64 {
    let mut table = [0u64; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        *slot = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
    }
    let mut x = seed | 1;
    for step in 0..CPU_UNIT_STEPS {
        x ^= x >> 31;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        if x & 1 == 0 {
            x ^= table[(x >> 56) as usize];
        } else {
            x = x.rotate_left(17).wrapping_add(step);
        }
        table[(x & 0xFF) as usize] ^= x;
    }
    x
}

#[derive(Serialize, Debug)]
pub struct CpuCalibration {
    pub unit_version: u32,
    pub unit_steps: u64,
    pub units: u32,
    /// Median of the units' times: what a typical moment of this machine gives (steal included).
    pub us_per_unit: f64,
    /// The fastest unit: nearer to what the core can do undisturbed.
    pub us_per_unit_min: f64,
    pub us_per_unit_max: f64,
    /// The chain's result, so the work cannot be optimised away (and equal across machines).
    pub checksum: u64,
}

/// Time `units` units one after another on the calling thread.
pub fn cpu(units: u32) -> CpuCalibration {
    assert!(units > 0, "at least one unit");
    let mut times_us = Vec::with_capacity(units as usize);
    let mut checksum = 0u64;
    for i in 0..units {
        let started = Instant::now();
        checksum ^= black_box(cpu_unit(black_box(u64::from(i) + 1)));
        times_us.push(started.elapsed().as_secs_f64() * 1e6);
    }
    times_us.sort_by(f64::total_cmp);
    let n = times_us.len();
    let median = if n % 2 == 1 {
        times_us[n / 2]
    } else {
        (times_us[n / 2 - 1] + times_us[n / 2]) / 2.0
    };
    CpuCalibration {
        unit_version: CPU_UNIT_VERSION,
        unit_steps: CPU_UNIT_STEPS,
        units,
        us_per_unit: median,
        us_per_unit_min: times_us[0],
        us_per_unit_max: times_us[n - 1],
        checksum,
    }
}

/// The complete requests at the start of `buf` (each ends with an empty line; the reference client
/// sends no bodies) and how many bytes they take.
pub fn complete_requests(buf: &[u8]) -> (usize, usize) {
    let mut count = 0;
    let mut used = 0;
    while let Some(end) = buf[used..].windows(4).position(|w| w == b"\r\n\r\n") {
        used += end + 4;
        count += 1;
    }
    (count, used)
}

/// Serve the reference response on `listener` until the process is stopped: one thread per
/// connection, each answering every complete request in what it read with one write.
pub fn serve(listener: TcpListener) -> std::io::Result<()> {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                std::thread::spawn(move || {
                    let _ = connection(stream); // a client that goes away ends only its thread
                });
            }
            // Out of descriptors or a connection reset before accept: the next one may work.
            Err(e) => eprintln!("netarena-load calibrate serve: accept: {e}"),
        }
    }
    Ok(())
}

fn connection(mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{}",
        REFERENCE_BODY.len(),
        String::from_utf8_lossy(REFERENCE_BODY)
    )
    .into_bytes();
    let mut buf = vec![0u8; 64 * 1024];
    let mut filled = 0;
    let mut out = Vec::new();
    loop {
        if filled == buf.len() {
            return Ok(()); // a request larger than the buffer is not the reference client's
        }
        let n = stream.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let (count, used) = complete_requests(&buf[..filled]);
        if count > 0 {
            out.clear();
            for _ in 0..count {
                out.extend_from_slice(&response);
            }
            stream.write_all(&out)?;
            buf.copy_within(used..filled, 0);
            filled -= used;
        }
    }
}

/// Bind `addr` and say where: the line `listening on ADDR` on stdout once the socket accepts, so a
/// caller that asked for port 0 learns the port and knows the server is ready.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_is_a_pure_function_of_its_seed() {
        assert_eq!(cpu_unit(1), cpu_unit(1));
        assert_ne!(cpu_unit(1), cpu_unit(2));
    }

    #[test]
    fn cpu_reports_ordered_times_for_every_unit() {
        let c = cpu(3);
        assert_eq!(c.units, 3);
        assert!(c.us_per_unit_min <= c.us_per_unit && c.us_per_unit <= c.us_per_unit_max);
        assert!(c.us_per_unit_min > 0.0);
        assert_eq!(c.checksum, cpu_unit(1) ^ cpu_unit(2) ^ cpu_unit(3));
    }

    #[test]
    fn complete_requests_counts_only_whole_ones() {
        let two_and_a_half = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n\r\nGET /";
        assert_eq!(complete_requests(two_and_a_half), (2, 45));
        assert_eq!(complete_requests(b"GET / HTTP/1.1\r\n"), (0, 0));
    }
}
