//! qwen-code's turn-end event, read by `loop-hook stop-hook --host qwen-code`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::stop_event("qwen-code", data));
