//! The prompt text the prompt hook reads for the user's for-loop commands, on every host.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::user_command(data));
