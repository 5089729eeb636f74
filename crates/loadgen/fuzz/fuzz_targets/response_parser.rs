//! The HTTP response parser on arbitrary bytes: it must never panic, and where the input is cut
//! into two reads must not change what it finds (responses or the fact of an error).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netarena_load::http::parse_pieces;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let whole = parse_pieces(&[stream], true);
    let at = usize::from(split) * stream.len() / 256;
    let split_result = parse_pieces(&[&stream[..at], &stream[at..]], true);
    match (&whole, &split_result) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "split at {at} changed the responses"),
        (Err(_), Err(_)) => {}
        // A response head over MAX_HEAD_BYTES is only detected once that much is buffered, which
        // depends on the read sizes; anything else must agree.
        _ => panic!("split at {at}: {whole:?} vs {split_result:?}"),
    }
});
