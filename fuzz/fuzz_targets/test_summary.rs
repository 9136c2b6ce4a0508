//! Verify's output, read for the test runners' summaries as it streams past.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::test_summary(data));
