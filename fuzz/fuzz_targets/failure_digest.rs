//! Verify's output, read for the failures it reports by name as it streams past.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::failure_digest(data));
