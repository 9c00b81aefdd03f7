#![no_main]
//! Fuzzes `secondhit::fuzzing::store_entry`, whose doc says how it reads its input.

libfuzzer_sys::fuzz_target!(|data: &[u8]| secondhit::fuzzing::store_entry(data));
