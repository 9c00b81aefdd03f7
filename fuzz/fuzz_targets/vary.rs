#![no_main]
//! Fuzzes `secondhit::fuzzing::vary`, whose doc says how it reads its input.

libfuzzer_sys::fuzz_target!(|data: &[u8]| secondhit::fuzzing::vary(data));
