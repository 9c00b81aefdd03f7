#![no_main]
//! Fuzzes `secondhit::fuzzing::cache_key`, whose doc says how it reads its input.

libfuzzer_sys::fuzz_target!(|data: &[u8]| secondhit::fuzzing::cache_key(data));
