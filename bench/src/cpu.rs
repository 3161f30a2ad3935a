//! CPU seconds of the server under test (its processes in /proc) and of this
//! process, for the per-1000-jobs figures.

use tokio_postgres::Client;

/// The postmaster of the server under test (the parent of a backend of it), so
/// that other PostgreSQL servers on the machine are not counted.
static POSTMASTER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Fields after the command name of /proc/PID/stat.
pub(crate) fn proc_stat(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    Some(stat[close + 2..].split(' ').map(str::to_owned).collect())
}

/// Seconds in the given clock-tick fields of a /proc stat line.
pub(crate) fn cpu_fields(f: &[String], fields: &[usize]) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    fields
        .iter()
        .map(|&i| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0))
        .sum::<f64>()
        / tick
}

pub(crate) async fn find_postmaster(admin: &Client) {
    let backend: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid")
        .get(0);
    // field 1 after the name is the parent pid; a server on another machine
    // (no such process here) leaves the CPU figures at zero
    if let Some(ppid) = proc_stat(&backend.to_string()).and_then(|f| f.get(1)?.parse().ok()) {
        let _ = POSTMASTER.set(ppid);
    }
}

/// CPU seconds (user + system) of the server under test: the postmaster with the
/// time of its exited children (backends whose connection closed before the
/// second reading would otherwise drop out of the sum), plus its live children.
pub(crate) fn server_cpu() -> f64 {
    let Some(&pm) = POSTMASTER.get() else {
        return 0.0;
    };
    let mut total = 0.0;
    if let Some(f) = proc_stat(&pm.to_string()) {
        // utime, stime, cutime, cstime
        total += cpu_fields(&f, &[11, 12, 13, 14]);
    }
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let Some(f) = proc_stat(pid) else { continue };
            if f.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pm) {
                total += cpu_fields(&f, &[11, 12]);
            }
        }
    }
    total
}

/// This process's user + system CPU seconds, to the microsecond: a B=100 case
/// spends ~40 ms of client CPU, four of /proc's 10 ms ticks.
pub(crate) fn own_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}
