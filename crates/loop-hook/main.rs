//! `loop-hook`: see `loop-hook --help`. Everything is in the `for-loop-core` library.

use std::io;
use std::process::ExitCode;

fn main() -> ExitCode {
    // stop-hook catches panics and reports them in its own output; one short line on stderr is
    // enough for the host's debug log.
    std::panic::set_hook(Box::new(|info| eprintln!("loop-hook: internal error: {info}")));
    for_loop_core::prepare_process();
    let env = for_loop_core::Environment::from_process();
    let code = for_loop_core::run(
        std::env::args_os().skip(1),
        &env,
        &mut io::stdin().lock(),
        &mut io::stdout().lock(),
    );
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}
