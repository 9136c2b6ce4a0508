//! The argument text of `/for-loop`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::loop_request(data));
