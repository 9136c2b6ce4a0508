//! A metric command's output, and the metric flags' values.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::metric_output(data));
