//! opencode's plugin payload (a `session.idle` event and the session's info), read by
//! `loop-hook stop-hook --host opencode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::stop_event("opencode", data));
