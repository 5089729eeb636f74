//! HTTP/2 frames from a server, on arbitrary bytes: the client's connection must never panic, and
//! where the bytes are cut into two reads must not change what it makes of them (the same events,
//! replies and connection error). The property lives in the library (`http2::check_fuzz_input`),
//! where a unit test runs it on every `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netarena_load::http2::check_fuzz_input;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_fuzz_input(data) {
        panic!("{e}");
    }
});
