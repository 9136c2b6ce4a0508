//! A Claude Code transcript, read for the current turn's text and pending tool calls.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::transcript(data));
