//! A plan file (`--plan`): a Markdown checklist or a prd.json, read as the start reads it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::plan(data));
