//! codex's turn-end event, read by `loop-hook stop-hook --host codex`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::stop_event("codex", data));
