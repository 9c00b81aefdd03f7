#![no_main]
//! Fuzzes `secondhit_proxy::fuzzing::lean_heads`, whose doc says how it reads its input.

libfuzzer_sys::fuzz_target!(|data: &[u8]| secondhit_proxy::fuzzing::lean_heads(data));
