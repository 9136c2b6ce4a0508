//! A loop's ledger (and a lessons file), read by the store's line readers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::ledger(data));
