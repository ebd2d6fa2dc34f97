//! Open an exported crash image with the real fjall, outside the simulator (no world is bound: every call is the
//! host's), and print what a recovered database holds: `fjall-open DIR` lists the keyspace `items`' keys and value
//! lengths. Used to check a finding on a real disk (README.md, "Triage").
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: fjall-open DIR   (DIR: an exported image's disk/fjall directory, copied somewhere writable)");
        return ExitCode::from(2);
    };
    match fjall_sim::open_and_list(std::path::Path::new(&dir)) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("fjall-open: {dir}: {error}");
            ExitCode::FAILURE
        }
    }
}
