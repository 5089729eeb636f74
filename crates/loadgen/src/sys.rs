//! Thin wrappers over the few OS facilities std does not expose: per-thread CPU time and time spent
//! waiting for a CPU, CPU pinning, and a UTC timestamp formatter (to avoid a date-time dependency for
//! one line of output).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// CPU time consumed by the calling thread (user + system), from CLOCK_THREAD_CPUTIME_ID.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// (user, system) CPU time of the calling thread, from getrusage(RUSAGE_THREAD).
pub fn thread_rusage() -> (Duration, Duration) {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid and writable.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Time the calling thread spent runnable but waiting on a runqueue for a CPU (`run_delay`, the
/// second field of /proc/thread-self/schedstat), or None when the kernel keeps no such account
/// (built without CONFIG_SCHED_INFO: no such file). The kernel adds to these fields when a thread
/// leaves its CPU, so a thread that has run without a break since it started reads 0 for both:
/// zeros are a real reading, not a missing account.
pub fn thread_run_delay() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    let (_on_cpu_ns, run_delay_ns) = (fields.next()??, fields.next()??);
    Some(Duration::from_nanos(run_delay_ns))
}

/// A load thread's clocks at the start of its measured phase; `usage` at the end turns them into
/// what the phase cost. The one place both closed-loop engines and the open loop take them, read
/// by the thread itself twice per phase (never on the per-request path).
#[derive(Clone, Copy)]
pub struct ThreadClocks {
    cpu: Duration,
    user: Duration,
    sys: Duration,
    run_delay: Option<Duration>,
    wall: Instant,
}

/// What one thread's measured phase cost: CPU time (total and its user/system split), time spent
/// waiting for a CPU (None: not available on this kernel), and wall time.
pub struct ThreadUsage {
    pub cpu_time: Duration,
    pub user_time: Duration,
    pub sys_time: Duration,
    pub run_delay: Option<Duration>,
    pub wall_time: Duration,
}

impl ThreadClocks {
    /// The calling thread's clocks now; `wall` is the instant the phase is taken to start.
    pub fn read(wall: Instant) -> Self {
        let (user, sys) = thread_rusage();
        ThreadClocks {
            cpu: thread_cpu_time(),
            user,
            sys,
            run_delay: thread_run_delay(),
            wall,
        }
    }

    /// The calling thread's usage from these clocks (taken by the same thread) to `stopped_at`.
    pub fn usage(&self, stopped_at: Instant) -> ThreadUsage {
        let now = ThreadClocks::read(stopped_at);
        ThreadUsage {
            cpu_time: now.cpu.saturating_sub(self.cpu),
            user_time: now.user.saturating_sub(self.user),
            sys_time: now.sys.saturating_sub(self.sys),
            run_delay: now
                .run_delay
                .zip(self.run_delay)
                .map(|(end, start)| end.saturating_sub(start)),
            wall_time: stopped_at.saturating_duration_since(self.wall),
        }
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within it because cpu < CPU_SETSIZE is checked.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPUs this process may run on (its affinity mask), used to reject `--cpus` naming others.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as above; the mask is only read for indices below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// RFC 3339 UTC with microseconds, e.g. `2026-11-22T10:00:00.123456Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Days since 1970-01-01 → (year, month, day); Howard Hinnant's `civil_from_days` algorithm
/// (http://howardhinnant.github.io/date_algorithms.html).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A CLOCK_MONOTONIC timerfd armed at absolute instants, registered in a thread's mio `Poll`.
///
/// mio's poll timeout (epoll_wait) has millisecond resolution, and epoll's own timeout adds the
/// thread's timer slack (50 µs by default); an hrtimer behind a timerfd has neither, so an
/// open-loop thread can sleep until the next intended send and wake within a few µs of it.
/// The fd is never read: re-arming resets its expiration count, and with edge-triggered
/// registration every expiry raises a fresh event.
pub struct TimerFd {
    fd: std::os::fd::OwnedFd,
    /// An `Instant` and the CLOCK_MONOTONIC reading taken with it: `Instant` is CLOCK_MONOTONIC
    /// on Linux but exposes no timespec, so targets are converted through this pair.
    base_instant: std::time::Instant,
    base_ns: u128,
    armed_for: Option<std::time::Instant>,
}

impl TimerFd {
    pub fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The Instant first, the clock second: the pair's clock reading is then at or after the
        // Instant's own, so a converted target is never earlier than asked (a timer firing before
        // its target would wake a waiter that then sleeps on with no timer left to wake it).
        let base_instant = std::time::Instant::now();
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid pointer to a local timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Ok(TimerFd {
            // SAFETY: fd is a fresh descriptor we own.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            base_instant,
            base_ns: ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128,
            armed_for: None,
        })
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    /// Fire once at `at` (at once if it is already past). A no-op when already armed for `at`.
    pub fn arm_at(&mut self, at: std::time::Instant) -> std::io::Result<()> {
        if self.armed_for == Some(at) {
            return Ok(());
        }
        let ns = if at >= self.base_instant {
            self.base_ns + (at - self.base_instant).as_nanos()
        } else {
            self.base_ns
                .saturating_sub((self.base_instant - at).as_nanos())
                .max(1)
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and pointers to local structs.
        let rc = unsafe {
            libc::timerfd_settime(
                self.raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.armed_for = Some(at);
        Ok(())
    }

    /// The timer fired (or was disarmed): the next `arm_at` must really re-arm.
    pub fn expired(&mut self) {
        self.armed_for = None;
    }
}

/// Wall-clock now, in nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u128 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// For the unit tests: this machine lacks a kernel feature a test checks (io_uring, DEFER_TASKRUN,
/// schedstat). `make test` needs them all (README, Requirements), so under CI (the variable `CI`
/// set, as `.ci/run` does) that fails the test; elsewhere the test prints what it did not check and
/// returns. The integration tests have the same rule in tests/common (they cannot see this crate's
/// test-only code).
#[cfg(test)]
pub(crate) fn feature_missing(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what}: under CI every test must run (make test needs io_uring and Linux 6.12+)"
    );
    eprintln!("SKIPPED: {what}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        // 2024-02-29T23:59:59.5Z: a leap day, checked against `date -u -d @1709251199`.
        let t = UNIX_EPOCH + Duration::from_micros(1_709_251_199_500_000);
        assert_eq!(rfc3339_utc(t), "2024-02-29T23:59:59.500000Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_800); // 2100-01-01, not a leap year
        assert_eq!(rfc3339_utc(t), "2100-01-01T00:00:00.000000Z");
    }

    #[test]
    fn thread_cpu_advances() {
        let before = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time() > before);
    }

    /// A thread made to wait for its CPU: two threads pinned to one CPU, both spinning, each gets
    /// about half of it and waits on the runqueue for the rest, and `usage` reports that wait.
    #[test]
    fn run_delay_counts_the_wait_for_a_shared_cpu() {
        if thread_run_delay().is_none() {
            feature_missing("no /proc/thread-self/schedstat (CONFIG_SCHED_INFO)");
            return;
        }
        let cpu = *allowed_cpus().first().expect("some CPU is allowed");
        let spin = move || {
            pin_current_thread(cpu).unwrap();
            let start = ThreadClocks::read(Instant::now());
            while start.wall.elapsed() < Duration::from_millis(400) {
                std::hint::black_box(thread_cpu_time());
            }
            start.usage(Instant::now())
        };
        let other = std::thread::spawn(spin);
        let mine = std::thread::spawn(spin).join().unwrap();
        other.join().unwrap();
        let delay = mine.run_delay.expect("schedstat was readable at the start");
        // Two spinners on one CPU: each waits for the other's slices. A fifth of the wall holds on a
        // machine busier than this; the exact half depends on the scheduler and other work.
        assert!(
            delay >= mine.wall_time / 5,
            "run_delay {delay:?} of {:?}",
            mine.wall_time
        );
        assert!(mine.cpu_time + delay <= mine.wall_time + Duration::from_millis(50));
    }
}
