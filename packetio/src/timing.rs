//! Waiting on time: the thread that times frames sleeps in `ppoll` with a
//! nanosecond timeout and spins for the last [`SPIN_NS`]; tokio's
//! millisecond timers overshoot a 100 us sleep by about a millisecond.
//!
//! Measured here: with the timer slack at 1 ns a sleep overshoots by about
//! 5 us (p50) and 9 us (p99); about one wait in a thousand stalls some 4 ms
//! (a vCPU preemption).

use std::io;
use std::time::Duration;

/// Spin instead of sleeping when the next frame is due within this long:
/// waking from a deeper sleep (idle states, a VM's timer path) takes tens
/// of microseconds, which would make frames late.
pub const SPIN_NS: u64 = 100_000;

/// Sets the calling thread's timer slack to 1 ns (the default, 50 us, would
/// be added to every sleep).
pub fn lower_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Asks for real-time scheduling (SCHED_FIFO) for the calling thread, so
/// frames leave on time on a busy machine. The thread sleeps between frames
/// and spins only for the last few microseconds, so it cannot monopolise a
/// core; without the privilege it runs at normal priority.
pub fn request_realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a valid param.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
}

/// Asks for the most CPU the fair scheduler gives (nice -20) for the
/// calling thread, without real-time scheduling. A real-time thread that
/// times frames under load is busy nearly all the time, and then either
/// the kernel's real-time throttling stops it for 50 ms a second or it
/// starves the softirq work queued on its core (the frames it just sent):
/// measured with 64-byte frames at 80% of the link engine's capacity on 2
/// cores, p99 one-way delay error 29-35 ms with SCHED_FIFO, 2.0-2.4 ms at
/// nice -20. Without the privilege it runs at normal priority.
pub fn request_priority() {
    // SAFETY: setpriority on the calling thread (its tid) only changes its
    // nice value.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -20);
    }
}

/// Waits until one of `fds` is readable or `wait` has passed, with the
/// kernel's high-resolution timers (`ppoll`), not millisecond `poll`.
pub fn wait_readable(fds: &mut [libc::pollfd], wait: Duration) -> io::Result<()> {
    let timeout = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: ppoll over a valid array of pollfds with a valid timeout.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
