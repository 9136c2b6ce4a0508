//! Where a judged command's output ends: at the command's exit, with nothing it started left to
//! write after it.
//!
//! A grace after the exit is no boundary: a process the command left behind (`setsid`, a double
//! fork) that waits for the exit, by polling or on a pidfd, writes a passing summary or a better
//! `METRIC` line inside any grace. So what the command started must be gone by the time its
//! output is read, and which way that is made sure of is decided once per process:
//!
//! - [`Containment::Namespace`]: the command is the first process of a PID namespace of its own
//!   (a user namespace too when not root, with the same uid and gid, and a `/proc` of its own).
//!   When that process exits, the kernel kills everything left in the namespace before the exit
//!   is reported to the supervisor, so nothing the command started outlives it. A descendant
//!   that watches the first process loses. One that watches a program the first process runs
//!   (the shell's `sh bench.sh`) is told of that program's exit while the shell still runs,
//!   and can write in that moment: a pidfd waiter would, so `pidfd_open` is denied in the
//!   namespace; one that polls without pause still can, as can one woken by the end of a pipe
//!   the first process held as it exits.
//! - [`Containment::Subreaper`]: the supervisor is a subreaper, so what the command leaves is
//!   handed to it instead of to init; when the command exits the supervisor kills it all (until
//!   none is left) before it reports. A descendant that waits for the exit can still write in
//!   the moment between the exit and the kill.
//! - [`Containment::Grace`]: neither (not Linux): output is read for a short grace after the
//!   exit, and a process still holding it then is cut off and said.
//!
//! Either way the output is then read only to what is in the pipe: a write end still open after
//! the first two is held by a process outside the command's tree (its descriptor was passed out),
//! which is never a pass.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// How a judged command's descendants are kept from writing after its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Containment {
    /// The command is PID 1 of a PID namespace of its own.
    Namespace,
    /// The supervisor is a subreaper and kills what is left at the command's exit.
    Subreaper,
    /// Output is read for a grace after the exit.
    #[default]
    Grace,
}

/// Set once entering a namespace failed in this process: later commands do not try again.
static NAMESPACE_FAILED: AtomicBool = AtomicBool::new(false);

impl Containment {
    /// The one this system allows, probed the first time it is asked (for `doctor`).
    pub(crate) fn probed() -> Containment {
        static PROBED: OnceLock<Containment> = OnceLock::new();
        *PROBED.get_or_init(probe)
    }

    /// The one a judged command tries first: on Linux a namespace, until entering one failed
    /// in this process. Trying is the probe: a failure is seen at the spawn, which then falls
    /// back, and no process is spent on asking first at every stop.
    pub(crate) fn first_tried() -> Containment {
        if cfg!(target_os = "linux") && !NAMESPACE_FAILED.load(Ordering::Relaxed) {
            Containment::Namespace
        } else {
            without_namespace()
        }
    }

    /// What to fall back to once entering a namespace failed; later commands start there.
    pub(crate) fn namespace_failed() -> Containment {
        NAMESPACE_FAILED.store(true, Ordering::Relaxed);
        without_namespace()
    }

    /// Its name, for the ledger and `doctor`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Containment::Namespace => "pid-namespace",
            Containment::Subreaper => "subreaper",
            Containment::Grace => "grace",
        }
    }

    /// What it means for the output of a judged command, in a sentence.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Containment::Namespace => {
                "each judged command runs as the first process of a PID namespace of its own, where \
                 pidfd_open is denied: what it leaves running is killed by the kernel before its exit \
                 is reported, so nothing it started outlives it (a process that polls without pause \
                 for the end of a program the command runs, or is woken by the end of a pipe the \
                 command's own process held, can still write in the moment before)"
            }
            Containment::Subreaper => {
                "PID namespaces are not available here, so what a judged command leaves running is \
                 killed by its supervisor (a subreaper) when it exits; a process that waits for that \
                 exit can still write in the moment before the kill"
            }
            Containment::Grace => {
                "neither a PID namespace nor a subreaper is available here, so a judged command's output \
                 is read for 200 ms after it exits; a process it left behind can write in that time"
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn probe() -> Containment {
    if linux::namespace_works() { Containment::Namespace } else { without_namespace() }
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Containment {
    Containment::Grace
}

/// The subreaper where the supervisor can list its children, the grace elsewhere.
fn without_namespace() -> Containment {
    if cfg!(target_os = "linux") && std::path::Path::new("/proc/thread-self/children").exists() {
        Containment::Subreaper
    } else {
        Containment::Grace
    }
}

#[cfg(target_os = "linux")]
pub(crate) use linux::{Entry, deny_pidfd_open, mount_proc, supervise, write_all};

/// Entering a PID namespace, in a child between fork and exec.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod linux {
    use std::ffi::CStr;
    use std::os::fd::RawFd;

    use nix::libc;

    /// What a child needs to enter the namespaces, made before it is forked: a forked child of a
    /// process with threads may not allocate.
    pub(crate) struct Entry {
        root: bool,
        uid_map: Vec<u8>,
        gid_map: Vec<u8>,
    }

    impl Entry {
        pub(crate) fn new() -> Entry {
            // SAFETY: these never fail and touch no memory.
            let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
            Entry {
                root: euid == 0,
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            }
        }

        /// Makes the caller's next child the first process of a new PID namespace, in a mount
        /// namespace of its own; not root, in a user namespace that maps the caller's own uid and
        /// gid (so files keep their owners and the command is no more privileged than it was).
        ///
        /// # Safety
        /// Async-signal-safe: to be called in a forked child before exec.
        pub(crate) unsafe fn unshare(&self) -> bool {
            let user = if self.root { 0 } else { libc::CLONE_NEWUSER };
            // SAFETY: system calls on this process alone.
            unsafe {
                if libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS | user) != 0 {
                    return false;
                }
                if self.root {
                    return true;
                }
                // Older kernels have no setgroups file, and need none written.
                write_file(c"/proc/self/setgroups", b"deny");
                write_file(c"/proc/self/uid_map", &self.uid_map)
                    && write_file(c"/proc/self/gid_map", &self.gid_map)
            }
        }
    }

    /// Mounts a `/proc` of the namespace's own over `/proc`, so `/proc/$$` and `ps` show the
    /// command's processes; the mount stays in its mount namespace.
    ///
    /// # Safety
    /// Async-signal-safe: to be called in the namespace's first process before exec.
    pub(crate) unsafe fn mount_proc() -> bool {
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: mounts in this process's own mount namespace, with constant strings.
        unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
                && libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null())
                    == 0
        }
    }

    /// `pidfd_open`, the same number wherever new system calls share one table (since Linux
    /// 5.1): x86, Arm, RISC-V and others; on alpha and MIPS the filter denies nothing.
    const PIDFD_OPEN: u32 = 434;
    /// The bit x86-64 sets in the number of a call made through the x32 interface.
    const X32: u32 = 0x4000_0000;

    /// `pidfd_open` denied with `ENOSYS`, as on a kernel without it; every other call allowed.
    /// The number is at the start of the `seccomp_data` the filter is given.
    const DENY_PIDFD_OPEN: [libc::sock_filter; 5] = [
        bpf(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0),
        bpf(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, PIDFD_OPEN),
        bpf(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, PIDFD_OPEN | X32),
        bpf(BPF_RET | BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        bpf(BPF_RET | BPF_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs()),
    ];
    const BPF_LD: u16 = 0x00;
    const BPF_W: u16 = 0x00;
    const BPF_ABS: u16 = 0x20;
    const BPF_JMP: u16 = 0x05;
    const BPF_JEQ: u16 = 0x10;
    const BPF_K: u16 = 0x00;
    const BPF_RET: u16 = 0x06;

    const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }

    /// Takes `pidfd_open` away from this process and everything it starts, for good: a pidfd on
    /// a program the command's shell runs wakes its waiter the moment that program exits, while
    /// the shell, the namespace's first process, still runs, so the waiter could write a line
    /// before the command's exit and the kernel's kill. Code written for kernels before 5.3
    /// falls back to what it did there. False if the filter could not be installed.
    ///
    /// `PR_SET_NO_NEW_PRIVS`, which an unprivileged filter needs, takes nothing here: in a user
    /// namespace of our own a setuid program gains nothing anyway, and as root there is no
    /// privilege to gain. The subreaper has neither, and its checks may use `sudo`: it is not
    /// done there.
    ///
    /// # Safety
    /// Async-signal-safe: to be called in the namespace's first process before exec.
    pub(crate) unsafe fn deny_pidfd_open() -> bool {
        let mut filter = DENY_PIDFD_OPEN;
        let program =
            libc::sock_fprog { len: u16::try_from(filter.len()).unwrap_or(0), filter: filter.as_mut_ptr() };
        // SAFETY: `program` points at `filter`, both alive for the calls, which only read them.
        unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &raw const program) == 0
        }
    }

    /// # Safety
    /// Async-signal-safe.
    unsafe fn write_file(path: &CStr, bytes: &[u8]) -> bool {
        // SAFETY: a descriptor opened and closed here.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return false;
            }
            let written = write_all(fd, bytes);
            libc::close(fd);
            written
        }
    }

    /// # Safety
    /// Async-signal-safe.
    pub(crate) unsafe fn write_all(fd: RawFd, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            // SAFETY: `bytes` is valid for its length.
            let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if n < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return false;
            }
            bytes = &bytes[n.unsigned_abs()..];
        }
        true
    }

    /// The supervisor of a command that is `pid`, the first process of its namespace: it keeps
    /// only `status_fd`, waits for the command, whose exit the kernel reports once everything
    /// else in the namespace is gone, and writes `prefix` and its exit status (128 + N for a
    /// signal N, as a shell reports it) there. Never returns.
    ///
    /// # Safety
    /// Async-signal-safe: to be called in a forked child instead of exec.
    pub(crate) unsafe fn supervise(pid: libc::pid_t, status_fd: RawFd, prefix: &[u8]) -> ! {
        // SAFETY: signal dispositions, descriptors and the child of this process alone.
        unsafe {
            // The hook's own handlers are no use here: a signal ends the supervisor, and an ended
            // supervisor is never a pass.
            for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
                libc::signal(signal, libc::SIG_DFL);
            }
            // Every descriptor the hook had, the output pipe among them: a copy kept here would
            // look like a process outside the check holding it open.
            close_all_but(status_fd);
            let mut status = 0;
            while libc::waitpid(pid, &raw mut status, 0) < 0 {
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    libc::_exit(1);
                }
            }
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                255
            };
            let mut line = [0u8; 96];
            let len = status_line(prefix, code, &mut line);
            write_all(status_fd, &line[..len]);
            libc::_exit(0)
        }
    }

    /// `prefix`, `code` in decimal and a newline, into `out`; its length.
    fn status_line(prefix: &[u8], code: i32, out: &mut [u8; 96]) -> usize {
        let prefix = &prefix[..prefix.len().min(out.len() - 12)];
        out[..prefix.len()].copy_from_slice(prefix);
        let mut len = prefix.len();
        let mut digits = [0u8; 11];
        let mut n = code.unsigned_abs();
        let mut count = 0;
        loop {
            digits[count] = b'0' + u8::try_from(n % 10).unwrap_or(0);
            count += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if code < 0 {
            out[len] = b'-';
            len += 1;
        }
        for digit in digits[..count].iter().rev() {
            out[len] = *digit;
            len += 1;
        }
        out[len] = b'\n';
        len + 1
    }

    /// # Safety
    /// Async-signal-safe.
    unsafe fn close_all_but(keep: RawFd) {
        // SAFETY: closing descriptors of this process.
        unsafe {
            let keep = libc::c_uint::try_from(keep).unwrap_or(0);
            let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
            let above = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
            if !(below && above) {
                // Kernels before 5.9.
                for fd in 0..65_536 {
                    if fd != keep.cast_signed() {
                        libc::close(fd);
                    }
                }
            }
        }
    }

    /// Whether a child can enter the namespaces and mount its `/proc`: user namespaces can be
    /// turned off, restricted (by `AppArmor`), or a container can refuse the mount.
    pub(crate) fn namespace_works() -> bool {
        let entry = Entry::new();
        // SAFETY: the children make only system calls and exit; the entry was made before.
        unsafe {
            match libc::fork() {
                -1 => false,
                0 => {
                    if !entry.unshare() {
                        libc::_exit(1);
                    }
                    let first = libc::fork();
                    if first == 0 {
                        libc::_exit(i32::from(!mount_proc()));
                    }
                    libc::_exit(i32::from(first < 0 || !exited_cleanly(first)))
                }
                child => exited_cleanly(child),
            }
        }
    }

    /// # Safety
    /// Async-signal-safe.
    unsafe fn exited_cleanly(pid: libc::pid_t) -> bool {
        let mut status = 0;
        // SAFETY: waits for a child of this process.
        unsafe {
            while libc::waitpid(pid, &raw mut status, 0) < 0 {
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return false;
                }
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_status_line_is_the_prefix_and_the_code() {
            let mut out = [0u8; 96];
            for (code, text) in
                [(0, "s 0\n"), (137, "s 137\n"), (-1, "s -1\n"), (i32::MIN, "s -2147483648\n")]
            {
                let len = status_line(b"s ", code, &mut out);
                assert_eq!(std::str::from_utf8(&out[..len]).unwrap(), text);
            }
            let long = [b'x'; 200];
            let len = status_line(&long, 7, &mut out);
            assert!(out[..len].ends_with(b"x7\n"), "a long prefix is cut, the code kept");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_containment_has_a_name_and_says_what_is_read() {
        let all = [Containment::Namespace, Containment::Subreaper, Containment::Grace];
        let names: Vec<&str> = all.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["pid-namespace", "subreaper", "grace"]);
        assert!(all.iter().all(|c| !c.words().is_empty()));
        assert_eq!(Containment::probed(), Containment::probed());
    }

    /// Once entering a namespace failed, the process stops trying: what it falls back to is
    /// what it tries first from then on.
    #[test]
    fn a_failed_namespace_is_not_tried_again() {
        let linux = cfg!(target_os = "linux");
        assert_eq!(Containment::first_tried() == Containment::Namespace, linux);
        let fallback = Containment::namespace_failed();
        assert_ne!(fallback, Containment::Namespace);
        assert_eq!(Containment::first_tried(), fallback);
        assert_eq!(fallback == Containment::Subreaper, linux);
    }
}
