//! A shell command line the guard reads before the agent's tool runs it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::shell_command(data));
