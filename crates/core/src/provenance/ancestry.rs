//! Who really sent a hook event, told from the hook's own process tree rather than from the
//! transcript the agent can write.
//!
//! A host starts its hook as its own child; the agent's shell is a child of the host too, and
//! whatever the agent runs descends from that shell or, once the shell is gone, from nothing of
//! the host's. So the hook reads its ancestry (Linux `/proc`), finds the outermost process of
//! its host there, and checks the one fact the agent's shell cannot arrange: how the host starts
//! a hook, which each host adapter states as a [`HookRunner`] measured on the real client
//! (docs/integrity.md, "Who sent an event"). The decision is [`decide`], a pure function over
//! the chain read; a chain that cannot be read, or a host with no measured rule, is
//! [`Provenance::Unreadable`], and the caller falls back to the transcript checks.

use crate::host::{HookRunner, HookSession};

/// One process of a hook's ancestry, as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) sid: i32,
    /// The kernel's name of its program, at most 15 bytes: what the process last `exec`ed.
    pub(crate) comm: String,
    /// Its command line, arguments joined by blanks.
    pub(crate) argv: String,
}

impl Process {
    fn is_one_of(&self, rule: &HookRunner) -> bool {
        rule.names.iter().any(|&(comm, word)| self.comm == comm && self.argv.contains(word))
    }
}

/// A hook's ancestry: the hook first, then its parent, up to the first process without one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Ancestry {
    pub(crate) chain: Vec<Process>,
    /// The process that made the Unix socket the hook reads its event from, when it is one
    /// (`SO_PEERCRED`): fixed when the socket is made, so no later `exec` or `dup2` changes it.
    pub(crate) stdin_maker: Option<i32>,
}

/// Where a hook event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// From the host's hook runner.
    Host,
    /// From something the agent ran.
    Agent(AgentPath),
    /// Not known from the process tree: the transcript checks decide, as before.
    Unreadable,
}

/// How an event the agent sent reached the hook, for the record and the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentPath {
    /// A process under the agent's tool shell.
    ToolShell,
    /// The agent's tool shell itself, `exec`ed into the hook: it reads its event from a socket
    /// the host never made.
    ExecedToolShell,
    /// A copy of the host the agent started from its shell.
    NestedHost,
    /// A process left behind by a shell that is gone (a background job, a daemon).
    LeftBehind,
}

impl AgentPath {
    /// "from a process under the agent's tool shell", for ledger lines and messages.
    pub(crate) fn how(self) -> &'static str {
        match self {
            AgentPath::ToolShell => "from a process under the agent's tool shell",
            AgentPath::ExecedToolShell => "from the agent's tool shell, exec'ed into the hook",
            AgentPath::NestedHost => "from a copy of the host the agent started from its shell",
            AgentPath::LeftBehind => "from a process the agent's shell left behind",
        }
    }
}

/// Where the event that `ancestry` shows came from, on a host whose hook runner is `rule`. Pure.
///
/// The outermost process of the host counts: a host the agent starts from its tool shell runs
/// real hooks, but under the outer host's tool shell. With no host process in the chain, an
/// event is the agent's only when its session's leader is no ancestor of it (the shell that
/// started it is gone: a background job or a daemon it left); otherwise (a terminal, a test, a
/// process in a session of its own) the process tree says nothing.
pub(crate) fn decide(ancestry: &Ancestry, rule: &HookRunner) -> Provenance {
    let chain = &ancestry.chain;
    let Some(hook) = chain.first() else { return Provenance::Unreadable };
    // The agent's commands in a PID namespace of the host's: none of them can see out of it.
    if let (Some(sandbox), Some(root)) = (rule.tool_sandbox, chain.last())
        && root.pid == 1
        && root.comm == sandbox
    {
        return Provenance::Agent(AgentPath::ToolShell);
    }
    let Some(mut outer) = chain.iter().skip(1).rposition(|p| p.is_one_of(rule)).map(|i| i + 1) else {
        let leader_is_ancestor = chain.iter().any(|p| p.pid == hook.sid);
        return if hook.sid > 1 && !leader_is_ancestor {
            Provenance::Agent(AgentPath::LeftBehind)
        } else {
            Provenance::Unreadable
        };
    };
    // A host that starts itself again (a launcher, then the program) is one host: the process
    // that runs the hooks is the innermost of the run.
    while outer > 1 && chain[outer - 1].is_one_of(rule) {
        outer -= 1;
    }
    let host = &chain[outer];
    let nested = chain[1..outer].iter().any(|p| p.is_one_of(rule));
    let started_by_host = hook.ppid == host.pid
        && match rule.session {
            // Only a direct child of the host leads a session the host made for it; the agent's
            // tool shell is one such child, so the hook must be that leader, never under it.
            HookSession::Own => hook.pid == hook.sid,
            // The host's own session, which the tool shell left: nothing joins a session again.
            HookSession::Host => hook.sid == host.sid,
        };
    if !started_by_host {
        return Provenance::Agent(if nested { AgentPath::NestedHost } else { AgentPath::ToolShell });
    }
    if rule.stdin_from_host && ancestry.stdin_maker != Some(host.pid) {
        return Provenance::Agent(AgentPath::ExecedToolShell);
    }
    Provenance::Host
}

/// Where this hook's event came from, for `host`: [`Provenance::Unreadable`] where the platform
/// hides the process tree or the host's hook runner was never measured.
pub(crate) fn of_this_hook(host: crate::host::Host) -> Provenance {
    by_rule(host.hook_runner())
}

/// The host process that started this hook, when its ancestry shows the event came from it.
pub(crate) fn host_of_this_hook(host: crate::host::Host) -> Option<i32> {
    if cfg!(test) {
        return None;
    }
    let rule = host.hook_runner()?;
    let ancestry = read()?;
    (decide(&ancestry, &rule) == Provenance::Host).then(|| ancestry.chain[0].ppid)
}

/// Where this hook's event came from, by `rule`, the way its host starts it; `None`: not known.
pub(crate) fn by_rule(rule: Option<HookRunner>) -> Provenance {
    // The engine's own tests run in whatever tree started them (an agent's shell, even): they
    // decide on recorded chains instead, and the integration tests on real ones.
    if cfg!(test) {
        return Provenance::Unreadable;
    }
    let Some(rule) = rule else { return Provenance::Unreadable };
    read().map_or(Provenance::Unreadable, |ancestry| decide(&ancestry, &rule))
}

/// The ancestry of this process, where the platform shows it.
pub(crate) fn read() -> Option<Ancestry> {
    imp::read()
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Ancestry, Process};

    /// Deeper than any real chain; a loop in a forged `/proc` (none can be) ends here.
    const MAX_DEPTH: usize = 64;

    pub(super) fn read() -> Option<Ancestry> {
        // A parent that exits while its chain is read leaves its child to init or a subreaper,
        // and its own file gone: read again once, the child's new parent then shows.
        read_once().or_else(read_once)
    }

    fn read_once() -> Option<Ancestry> {
        let mut chain = Vec::new();
        let mut pid = std::process::id().cast_signed();
        while pid > 0 && chain.len() < MAX_DEPTH {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut process = parse_stat(&text)?;
            process.argv = argv(pid);
            pid = process.ppid;
            chain.push(process);
        }
        Some(Ancestry { chain, stdin_maker: stdin_maker() })
    }

    /// `/proc/PID/stat`: `pid (comm) state ppid pgrp session ...`, where comm may hold blanks
    /// and parentheses, so it ends at the last `)`.
    pub(super) fn parse_stat(text: &str) -> Option<Process> {
        let (head, rest) = text.rsplit_once(')')?;
        let (pid, comm) = head.split_once(" (")?;
        let mut fields = rest.split_ascii_whitespace().skip(1);
        let ppid = fields.next()?.parse().ok()?;
        let _pgrp = fields.next()?;
        let sid = fields.next()?.parse().ok()?;
        let pid = pid.trim().parse().ok()?;
        Some(Process { pid, ppid, sid, comm: comm.to_string(), argv: String::new() })
    }

    /// The first 4 KiB of `/proc/PID/cmdline`, its NULs as blanks; empty when unreadable.
    fn argv(pid: i32) -> String {
        use std::io::Read;
        let mut bytes = Vec::new();
        if let Ok(file) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
            let _ = file.take(4096).read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).replace('\0', " ").trim_end().to_string()
    }

    fn stdin_maker() -> Option<i32> {
        use std::os::fd::AsFd;
        let stdin = std::io::stdin();
        let credentials =
            nix::sys::socket::getsockopt(&stdin.as_fd(), nix::sys::socket::sockopt::PeerCredentials).ok()?;
        Some(credentials.pid())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn read() -> Option<super::Ancestry> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE: HookRunner = HookRunner {
        names: &[("claude", "")],
        session: HookSession::Own,
        stdin_from_host: true,
        tool_sandbox: None,
    };

    fn p(pid: i32, ppid: i32, sid: i32, comm: &str) -> Process {
        Process { pid, ppid, sid, comm: comm.to_string(), argv: comm.to_string() }
    }

    /// Above every host in these chains: a terminal's shell and init.
    fn terminal() -> Vec<Process> {
        vec![p(100, 1, 100, "bash"), p(1, 0, 0, "init")]
    }

    fn chain(processes: Vec<Process>, stdin_maker: Option<i32>) -> Ancestry {
        Ancestry { chain: processes.into_iter().chain(terminal()).collect(), stdin_maker }
    }

    /// Claude Code 2.1.332: the hook leads a session of its own, a child of `claude`, reading a
    /// socket `claude` made.
    #[test]
    fn the_hosts_hook_is_the_hosts() {
        let hook = chain(vec![p(300, 200, 300, "loop-hook"), p(200, 100, 100, "claude")], Some(200));
        assert_eq!(decide(&hook, &CLAUDE), Provenance::Host);
    }

    #[test]
    fn a_hook_run_under_the_tool_shell_is_the_agents() {
        let under = chain(
            vec![
                p(400, 310, 300, "loop-hook"),
                p(310, 300, 300, "python3"),
                p(300, 200, 300, "bash"),
                p(200, 100, 100, "claude"),
            ],
            None,
        );
        assert_eq!(decide(&under, &CLAUDE), Provenance::Agent(AgentPath::ToolShell));
        // In a session of its own (setsid), still under the shell, reading a socket its parent made.
        let setsid = chain(
            vec![p(400, 300, 400, "loop-hook"), p(300, 200, 300, "bash"), p(200, 100, 100, "claude")],
            Some(300),
        );
        assert_eq!(decide(&setsid, &CLAUDE), Provenance::Agent(AgentPath::ToolShell));
        // A background job while the shell still runs: in the shell's session, under it.
        let job = chain(
            vec![
                p(400, 350, 300, "loop-hook"),
                p(350, 300, 300, "sh"),
                p(300, 200, 300, "bash"),
                p(200, 100, 100, "claude"),
            ],
            None,
        );
        assert_eq!(decide(&job, &CLAUDE), Provenance::Agent(AgentPath::ToolShell));
    }

    /// The tool shell `exec`ed into the hook has the hook's place in the tree; only the socket
    /// its event comes in on, which the host did not make, gives it away.
    #[test]
    fn an_execed_tool_shell_is_told_by_its_stdin() {
        let execed = |maker| chain(vec![p(300, 200, 300, "loop-hook"), p(200, 100, 100, "claude")], maker);
        assert_eq!(decide(&execed(None), &CLAUDE), Provenance::Agent(AgentPath::ExecedToolShell));
        assert_eq!(decide(&execed(Some(300)), &CLAUDE), Provenance::Agent(AgentPath::ExecedToolShell));
        assert_eq!(decide(&execed(Some(200)), &CLAUDE), Provenance::Host);
    }

    #[test]
    fn a_nested_host_is_the_agents_and_the_outermost_host_counts() {
        let nested = chain(
            vec![
                p(500, 400, 500, "loop-hook"),
                p(400, 300, 300, "claude"),
                p(300, 200, 300, "bash"),
                p(200, 100, 100, "claude"),
            ],
            Some(400),
        );
        assert_eq!(decide(&nested, &CLAUDE), Provenance::Agent(AgentPath::NestedHost));
    }

    #[test]
    fn a_process_left_behind_by_a_shell_that_is_gone_is_the_agents() {
        // A background job of the tool shell (session 300), the shell gone: reparented to init.
        let job =
            Ancestry { chain: vec![p(400, 1, 300, "loop-hook"), p(1, 0, 0, "init")], stdin_maker: None };
        assert_eq!(decide(&job, &CLAUDE), Provenance::Agent(AgentPath::LeftBehind));
        // Reparented to a subreaper instead.
        let reaped = Ancestry {
            chain: vec![p(400, 50, 300, "loop-hook"), p(50, 1, 50, "systemd"), p(1, 0, 0, "init")],
            stdin_maker: None,
        };
        assert_eq!(decide(&reaped, &CLAUDE), Provenance::Agent(AgentPath::LeftBehind));
    }

    /// A daemon in a session of its own, a terminal, a test: nothing in the tree says whose.
    #[test]
    fn without_the_host_in_the_tree_and_with_its_sessions_leader_it_is_unknown() {
        let daemon =
            Ancestry { chain: vec![p(400, 1, 400, "loop-hook"), p(1, 0, 0, "init")], stdin_maker: Some(400) };
        assert_eq!(decide(&daemon, &CLAUDE), Provenance::Unreadable);
        let terminal = chain(vec![p(400, 100, 100, "loop-hook")], None);
        assert_eq!(decide(&terminal, &CLAUDE), Provenance::Unreadable);
        // Session 0: started by init without a session of its own.
        let early =
            Ancestry { chain: vec![p(400, 1, 0, "loop-hook"), p(1, 0, 0, "init")], stdin_maker: None };
        assert_eq!(decide(&early, &CLAUDE), Provenance::Unreadable);
        assert_eq!(decide(&Ancestry::default(), &CLAUDE), Provenance::Unreadable);
    }

    /// Gemini CLI 0.61.0: `node` started again as `node`, hooks in its session, reading its
    /// socket; the shell tool in a session of its own, `exec`ed or not.
    #[test]
    fn a_host_that_runs_hooks_in_its_own_session_and_starts_itself_twice() {
        let rule = HookRunner {
            names: &[("node", "gemini")],
            session: HookSession::Host,
            stdin_from_host: true,
            tool_sandbox: None,
        };
        let node = |pid, ppid| Process {
            argv: "node /usr/lib/node_modules/gemini".into(),
            ..p(pid, ppid, 100, "node")
        };
        let hook = chain(vec![p(300, 210, 100, "loop-hook"), node(210, 200), node(200, 100)], Some(210));
        assert_eq!(decide(&hook, &rule), Provenance::Host);
        let tool = chain(
            vec![p(400, 300, 300, "loop-hook"), p(300, 210, 300, "bash"), node(210, 200), node(200, 100)],
            Some(210),
        );
        assert_eq!(decide(&tool, &rule), Provenance::Agent(AgentPath::ToolShell));
        let execed = chain(vec![p(300, 210, 300, "loop-hook"), node(210, 200), node(200, 100)], Some(210));
        assert_eq!(decide(&execed, &rule), Provenance::Agent(AgentPath::ToolShell));
        // Another program on node is not the host.
        let other = Process { argv: "node /opt/editor/server.js".into(), ..p(200, 100, 100, "node") };
        let unrelated = chain(vec![p(300, 200, 300, "loop-hook"), other], None);
        assert_eq!(decide(&unrelated, &rule), Provenance::Unreadable);
    }

    /// Codex 0.171.0 runs the agent's commands in a PID namespace of its sandbox.
    #[test]
    fn a_command_in_the_hosts_tool_sandbox_is_the_agents() {
        let rule = HookRunner {
            names: &[("codex", "")],
            session: HookSession::Own,
            stdin_from_host: false,
            tool_sandbox: Some("codex-linux-san"),
        };
        let hook = chain(vec![p(300, 200, 300, "loop-hook"), p(200, 100, 100, "codex")], None);
        assert_eq!(decide(&hook, &rule), Provenance::Host);
        let sandboxed = Ancestry {
            chain: vec![p(3, 2, 1, "loop-hook"), p(2, 1, 1, "bash"), p(1, 0, 1, "codex-linux-san")],
            stdin_maker: None,
        };
        assert_eq!(decide(&sandboxed, &rule), Provenance::Agent(AgentPath::ToolShell));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stat_lines_are_read_with_any_name() {
        let line = "42 (a) b (c)) S 7 42 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0";
        let parsed = imp::parse_stat(line).unwrap();
        assert_eq!((parsed.pid, parsed.ppid, parsed.sid, parsed.comm.as_str()), (42, 7, 9, "a) b (c)"));
        assert_eq!(imp::parse_stat("garbage"), None);
        let own = read().unwrap();
        assert_eq!(own.chain[0].pid, std::process::id().cast_signed());
        assert_eq!(own.chain[0].ppid, own.chain[1].pid);
        assert!(!own.chain[0].argv.is_empty());
    }
}
