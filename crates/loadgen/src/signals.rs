//! SIGINT and SIGTERM: the first one ends the measured phase early and the run prints what it
//! measured (marked `interrupted`, exit 105); a second one exits at once (128 + the signal's
//! number, as a shell reports a process killed by it). docs/load-generator.md, "Exit codes".
//!
//! The two signals are blocked in every thread (the mask is inherited, so `install` must run before
//! any other thread starts) and taken by one thread of their own with `sigwait`. That thread runs
//! ordinary code, not an async signal handler, and no engine's syscalls are ever interrupted: the
//! engines look at `stop_requested()` where they already look at the clock (every loop turn, at
//! least every `SWEEP_INTERVAL`) and end as if the measured phase were over.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static STOP: AtomicBool = AtomicBool::new(false);
static STOPPED_AT: OnceLock<Instant> = OnceLock::new();

/// Block SIGINT and SIGTERM in this thread (and every thread started after) and start the thread
/// that waits for them. Call first thing in `main`.
pub fn install() -> Result<(), String> {
    // SAFETY: a local sigset_t initialised by sigemptyset before use; pthread_sigmask on the
    // calling thread only.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(format!(
                "cannot block SIGINT/SIGTERM: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        set
    };
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is a valid, initialised signal set; sig is a valid out-pointer.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                continue;
            }
            if STOP.load(Ordering::SeqCst) {
                // SAFETY: _exit ends the process at once, with no destructors or buffered output
                // to run: that is what a second Ctrl-C asks for.
                unsafe { libc::_exit(128 + sig) };
            }
            STOPPED_AT.get_or_init(Instant::now);
            let name = if sig == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            // Before the flag: once it is set, main may print the result and exit before this
            // thread runs again.
            eprintln!("netarena-load: {name}: ending the measured phase and printing what was measured (send it again to quit at once)");
            STOP.store(true, Ordering::SeqCst);
        })
        .map(drop)
        .map_err(|e| format!("cannot start the signal thread: {e}"))
}

/// True once the first SIGINT/SIGTERM arrived: the measured phase is over.
#[inline]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// When the first signal arrived, if one did.
pub fn stopped_at() -> Option<Instant> {
    STOPPED_AT.get().copied()
}
