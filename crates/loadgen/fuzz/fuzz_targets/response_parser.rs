//! The HTTP response parser on arbitrary bytes: it must never panic, and where the input is cut
//! into two reads must not change what it finds (the same responses, or an error either way).
//! The property itself lives in the library (`http::fuzzing`), where the seeded corpus test
//! `http::tests::seeded_corpus_*` runs it on every `cargo test`, so the two cannot drift apart.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netarena_load::http::fuzzing::check_fuzz_input;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_fuzz_input(data) {
        panic!("{e}");
    }
});
