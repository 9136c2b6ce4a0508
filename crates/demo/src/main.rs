//! `for-loop-demo`: see the library docs, or run it with `--help`.

fn main() -> std::process::ExitCode {
    for_loop_demo::main(std::env::args_os().skip(1))
}
