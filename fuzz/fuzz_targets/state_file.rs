//! A loop's state file (YAML frontmatter and the task), read and written back by the store.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| for_loop_fuzz::state_file(data));
