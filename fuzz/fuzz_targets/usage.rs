//! A Claude Code transcript, read for the model's token usage.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::usage(data));
