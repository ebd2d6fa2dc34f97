//! `syscall(2)`, the C library's door to any system call by number (ADR-0162, ADR-0164). On a world thread:
//! `getrandom` is the world's (`crate::random`), the `io_uring` calls are refused (`crate::refuse`), and every
//! other number goes to the real `syscall`. Defined here once for the whole crate: the threads half adds its
//! `futex` arm to [`world_syscall`] (branch threads38).
//!
//! `syscall` is variadic in C; it is defined here with six integer parameters after the number, which on x86_64
//! System V are the registers (and first stack slot) a variadic caller fills for up to six integer arguments.
//! Arguments the caller did not pass are forwarded as whatever those registers held, which the kernel ignores for a
//! call that takes fewer.

#![expect(unsafe_code, reason = "C entry points (ADR-0162)")]

use libc::{c_long, c_void};

use crate::real::{real, set_errno};
use crate::world::{self, Call};

/// The world's answer to system call `number` on a bound thread, or `None` for the real `syscall`.
fn world_syscall(call: &Call, number: c_long, args: [c_long; 6]) -> Option<c_long> {
    match number {
        libc::SYS_getrandom => {
            let answer = crate::random::fill(call, "syscall(getrandom)", args[0] as *mut c_void, args[1] as usize);
            Some(crate::route::ret(answer, |count| isize::try_from(count).unwrap_or(isize::MAX)) as c_long)
        }
        libc::SYS_io_uring_setup | libc::SYS_io_uring_enter | libc::SYS_io_uring_register => {
            call.world.refuse(
                "io_uring_setup",
                format!(
                    "syscall({number}) is an io_uring call: the ring's IO would be the kernel's, on host descriptors, \
                     outside the world. Use the engine's synchronous IO (read/write/pread/pwrite) under the simulator"
                ),
            );
            set_errno(libc::ENOSYS);
            Some(-1)
        }
        _ => None,
    }
}

/// `syscall(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    let args = [a1, a2, a3, a4, a5, a6];
    if number == libc::SYS_futex {
        // The threads half (ADR-0165): checked before `world::begin`, since `env`'s own locking must reach the
        // kernel's futex whatever thread it runs on.
        if let Some(answer) = crate::futex::answer_futex(args) {
            return answer;
        }
    } else if let Some(call) = world::begin()
        && let Some(answer) = world_syscall(&call, number, args)
    {
        return answer;
    }
    type SyscallFn = unsafe extern "C" fn(c_long, ...) -> c_long;
    real!(syscall: SyscallFn => (number, a1, a2, a3, a4, a5, a6))
}
