#![no_main]
//! Fuzzes `secondhit::fuzzing::http_date`, whose doc says how it reads its input.

libfuzzer_sys::fuzz_target!(|data: &[u8]| secondhit::fuzzing::http_date(data));
