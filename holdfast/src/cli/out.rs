//! Standard output of the command line. A reader that went away (`simulator ... | head`) ends the process the way
//! SIGPIPE ends a C tool: quietly, with exit code 141 (128 + 13), not with a panic. Any other write error (a full
//! disk behind a redirection) is said on stderr and ends the process with exit code 3.

use std::fmt;
use std::io::{self, Write};

/// Exit code when standard output's reader closed it: what a shell reports for a tool SIGPIPE killed (128 + 13),
/// so `set -o pipefail` sees the same as for `yes | head`.
pub const EXIT_OUTPUT_CLOSED: u8 = 141;

/// Exit code when standard output failed for another reason (a full disk behind a redirection).
pub const EXIT_OUTPUT_FAILED: u8 = 3;

/// Write `args` to standard output; on failure end the process with [`exit_code_for`]'s code.
pub(crate) fn write(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(error) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        drop(stdout);
        let code = exit_code_for(&error);
        if code != EXIT_OUTPUT_CLOSED {
            eprintln!("error: cannot write to standard output: {error}");
        }
        std::process::exit(i32::from(code));
    }
}

/// The exit code for a failed write to standard output.
fn exit_code_for(error: &io::Error) -> u8 {
    if error.kind() == io::ErrorKind::BrokenPipe { EXIT_OUTPUT_CLOSED } else { EXIT_OUTPUT_FAILED }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_sigpipes_code_and_anything_else_is_output_failed() {
        assert_eq!(exit_code_for(&io::Error::from(io::ErrorKind::BrokenPipe)), EXIT_OUTPUT_CLOSED);
        assert_eq!(exit_code_for(&io::Error::from(io::ErrorKind::StorageFull)), EXIT_OUTPUT_FAILED);
        assert_eq!(exit_code_for(&io::Error::from(io::ErrorKind::PermissionDenied)), EXIT_OUTPUT_FAILED);
        assert_ne!(EXIT_OUTPUT_FAILED, super::super::EXIT_BAD_INPUT);
    }
}
