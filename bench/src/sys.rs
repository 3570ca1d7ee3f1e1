//! Small operating-system helpers: a clock shared between processes, process
//! memory, the machine's description, signals.

use std::path::Path;

/// Nanoseconds on `CLOCK_MONOTONIC`: one clock for every process on the
/// machine, so the fake upstream can stamp a frame and the load generator can
/// tell how long it took to arrive, whatever sat in between.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs * 1_000_000_000 + nanos
}

/// Asks the kernel to wake this thread's sleeps within `nanos` of the
/// deadline instead of the default 50 us slack: the open-loop pacer must
/// send close to the intended times.
pub fn set_timer_slack(nanos: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, nanos, 0, 0, 0);
    }
}

/// Resident and peak resident memory of a process, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM`: the peak RSS since the process started.
    pub hwm_kib: u64,
}

/// Reads `/proc/PID/status`; `None` once the process is gone.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status.lines().find_map(|line| {
            line.strip_prefix(name)?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:").unwrap_or(0),
    })
}

/// CPU time (user + system) a process has used so far.
pub fn cpu_time(pid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u64::try_from(per_second).ok().filter(|&t| t > 0)?;
    Some(std::time::Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000) / per_second,
    ))
}

/// Sends `signal` to one of our own child processes.
pub fn signal(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; the pid is a child we spawned and have not reaped.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// `nproc`, the CPU model and the memory, for the report header.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(|kib| kib / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
    format!("{cpus} CPUs ({model}), {mem_gib:.1} GiB memory, Linux {kernel}")
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
