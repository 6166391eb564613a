//! The `genward` binary: argv → config → daemon or client; outcome → exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => {
            println!("genward {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("genward: the daemon and client commands are not built yet");
            ExitCode::from(2)
        }
    }
}
