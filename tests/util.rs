//! A throwaway world per test: a project directory, a private loop store, and the `loop-hook`
//! binary run with a clean environment.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

pub(crate) const SESSION: &str = "11111111-2222-3333-4444-555555555555";

pub(crate) struct TestEnv {
    _root: TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
}

/// What one run of `loop-hook` gave.
pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as the hook's JSON; `Value::Null` for an empty stdout (a silent allow).
    pub(crate) fn json(&self) -> Value {
        if self.stdout.trim().is_empty() {
            return Value::Null;
        }
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// `true` when the hook blocked the stop.
    pub(crate) fn blocked(&self) -> bool {
        self.json().get("decision").and_then(Value::as_str) == Some("block")
    }

    pub(crate) fn reason(&self) -> String {
        self.json()["reason"].as_str().unwrap_or_default().to_string()
    }

    pub(crate) fn system_message(&self) -> String {
        self.json()["systemMessage"].as_str().unwrap_or_default().to_string()
    }
}

impl TestEnv {
    pub(crate) fn new() -> TestEnv {
        TestEnv::new_in(&std::env::temp_dir())
    }

    /// A test environment outside the system's temporary directory, for the Codex CLI: its
    /// sandbox will not set itself up under /tmp, and it lets commands write there. The first of
    /// the build's own temporary directory, the user's cache and /var/tmp that is not under
    /// /tmp and can be written, wherever the checkout and `$HOME` live (each environment is
    /// removed when dropped, as anywhere else).
    pub(crate) fn outside_tmp() -> TestEnv {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .or_else(|| home.map(|home| home.join(".cache")));
        let candidates: Vec<PathBuf> = [
            Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
            cache.map(|dir| dir.join("for-loop-tests")),
            Some(PathBuf::from("/var/tmp/for-loop-tests")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let parent = first_outside_tmp(&candidates).unwrap_or_else(|| {
            panic!(
                "the Codex tests need a writable directory outside /tmp, and none of {candidates:?} is one: \
                 set XDG_CACHE_HOME to one"
            )
        });
        TestEnv::new_in(&parent)
    }

    pub(crate) fn new_in(parent: &Path) -> TestEnv {
        let root = tempfile::Builder::new().prefix("for-loop-test-").tempdir_in(parent).unwrap();
        let home = root.path().join("home");
        let project = root.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        TestEnv { _root: root, home, project }
    }

    pub(crate) fn store(&self) -> PathBuf {
        self.home.join(".local/state/for-loop")
    }

    pub(crate) fn session_dir(&self, session: &str) -> PathBuf {
        self.store().join("sessions").join(session)
    }

    /// A loop the user started through the prompt hook (on `sh check.sh`, which fails), recorded
    /// in a transcript as the host records it; then a `/cancel-loop` the agent sent through the
    /// prompt hook itself, naming a transcript that does not exist; then the agent's `reply`,
    /// written as the host writes it before its Stop event. Returns the transcript's path.
    pub(crate) fn forge_a_cancel(&self, reply: &str) -> PathBuf {
        self.write("check.sh", "exit 1\n");
        let transcript = self.project.join("transcript.jsonl");
        let prompt = |text: &str, transcript: &Path| {
            json!({"session_id": SESSION, "transcript_path": transcript, "cwd": self.project,
                "prompt_id": "p-1", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                "prompt": text})
            .to_string()
        };
        let start = "/for-loop fix it --verify \"sh check.sh\"";
        let started = self.run(&["prompt-hook"], prompt(start, &transcript));
        assert_eq!(started.code, 0, "{}{}", started.stdout, started.stderr);
        let record = json!({"type": "user", "timestamp": jiff::Timestamp::now().to_string(),
            "message": {"role": "user", "content": start}});
        std::fs::write(&transcript, format!("{record}\n")).unwrap();
        let forged = self.run(&["prompt-hook"], prompt("/cancel-loop", Path::new("/nonexistent")));
        assert_eq!(forged.code, 0, "{}{}", forged.stdout, forged.stderr);
        let state = std::fs::read_to_string(self.state_path()).unwrap();
        assert!(!state.contains("status: active"), "cancelled for now: {state}");
        let reply = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": reply}]}});
        std::fs::write(&transcript, format!("{record}\n{reply}\n")).unwrap();
        transcript
    }

    pub(crate) fn state_path(&self) -> PathBuf {
        self.session_dir(SESSION).join("state.md")
    }

    pub(crate) fn ledger_path(&self) -> PathBuf {
        self.session_dir(SESSION).join("ledger.jsonl")
    }

    /// The reason code of each ledger line of `session`'s loop after its start, in order.
    pub(crate) fn ledger_reasons(&self, session: &str) -> Vec<String> {
        without_confirmations(after_start(ledger_lines(&self.session_dir(session).join("ledger.jsonl"))))
            .iter()
            .map(|l| l["reason"].as_str().unwrap().to_string())
            .collect()
    }

    /// The test session's ledger lines after its loop's start: its stops and commands.
    pub(crate) fn ledger(&self) -> Vec<Value> {
        self.ledger_of(SESSION)
    }

    /// `session`'s ledger lines after its loop's start, parsed, without the lines that only
    /// mark a prompt-hook command awaiting and then getting its confirmation (they witness the
    /// state's mark; `ledger_of_raw` keeps them).
    pub(crate) fn ledger_of(&self, session: &str) -> Vec<Value> {
        without_confirmations(self.ledger_of_raw(session))
    }

    /// `session`'s ledger lines after its loop's start, parsed, every one.
    pub(crate) fn ledger_of_raw(&self, session: &str) -> Vec<Value> {
        after_start(ledger_lines(&self.session_dir(session).join("ledger.jsonl")))
    }

    /// Every line of the test session's ledger, the start included.
    pub(crate) fn ledger_all(&self) -> Vec<Value> {
        ledger_lines(&self.ledger_path())
    }

    /// `loop-hook ARGS` with a clean environment, in a session of its own. A hook reads who sent
    /// its event from its process tree: one whose session's leader is gone is taken for a job an
    /// agent's shell left behind, which is what this test process is when its runner was started
    /// from a shell that has exited (`cargo nextest run &`, then the terminal closed). In a
    /// session of its own, a hook's tree says nothing, wherever the tests were started.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_loop-hook"));
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .current_dir(&self.project);
        own_session(&mut cmd);
        cmd
    }

    /// Runs `loop-hook ARGS` with `stdin`.
    pub(crate) fn run(&self, args: &[&str], stdin: impl AsRef<[u8]>) -> Run {
        run_command(self.command(args), stdin.as_ref())
    }

    /// Runs `loop-hook ARGS` with `stdin`, failing the test (after [`PATIENCE`], not hanging it)
    /// if it never ends: for inputs that once made the hook hang.
    pub(crate) fn run_quickly(&self, args: &[&str], stdin: impl AsRef<[u8]>) -> Run {
        let what = format!("loop-hook {}", args.join(" "));
        let Output { status, stdout, stderr } =
            run_within(self.command(args), &what, stdin.as_ref(), PATIENCE);
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    /// `/for-loop TEXT` in the test session, which must succeed.
    pub(crate) fn start(&self, text: &str) -> Run {
        let run = self.run(&["start", "--session", SESSION], text);
        assert_eq!(run.code, 0, "start failed: {}{}", run.stdout, run.stderr);
        run
    }

    /// One Stop event of `session`, as Claude Code 2.1.328 sends it.
    pub(crate) fn stop_as(&self, session: &str, last_message: &str, stop_hook_active: bool) -> Run {
        self.run(
            &["stop-hook"],
            stop_event(session, &self.project, last_message, stop_hook_active).to_string(),
        )
    }

    pub(crate) fn stop(&self, last_message: &str) -> Run {
        self.stop_as(SESSION, last_message, false)
    }

    /// Writes a project file, creating the directories it is in.
    pub(crate) fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.project.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Replaces home-directory paths in `text` so outputs can be compared as snapshots.
    pub(crate) fn redact(&self, text: &str) -> String {
        text.replace(&self.home.display().to_string(), "[HOME]")
            .replace(&self.project.display().to_string(), "[PROJECT]")
    }
}

fn ledger_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The lines after the ones that start a loop (`started`, and `claimed` for a loop that waited
/// for its conversation), which every loop's ledger begins with.
fn after_start(lines: Vec<Value>) -> Vec<Value> {
    lines.into_iter().filter(|l| l["reason"] != "started" && l["reason"] != "claimed").collect()
}

/// Without the lines that only witness a prompt-hook command awaiting, then getting, the host's
/// confirmation (`TestEnv::ledger_of_raw` keeps them).
fn without_confirmations(lines: Vec<Value>) -> Vec<Value> {
    let bookkeeping =
        |line: &Value| matches!(line["reason"].as_str(), Some("command_pending" | "command_confirmed"));
    lines.into_iter().filter(|line| !bookkeeping(line)).collect()
}

pub(crate) fn stop_event(session: &str, cwd: &Path, last_message: &str, stop_hook_active: bool) -> Value {
    json!({
        "session_id": session,
        "transcript_path": cwd.join("transcript.jsonl"),
        "cwd": cwd,
        "prompt_id": "p-1",
        "permission_mode": "default",
        "effort": {"level": "high"},
        "hook_event_name": "Stop",
        "stop_hook_active": stop_hook_active,
        "last_assistant_message": last_message,
        "background_tasks": [],
        "session_crons": [],
    })
}

/// Starts `cmd` as the leader of a new session ([`TestEnv::command`] says why). Twice is once:
/// a session's leader cannot start another, and the second call changes nothing.
#[cfg(unix)]
#[allow(unsafe_code)]
fn own_session(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    unsafe extern "C" {
        fn setsid() -> i32;
    }
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; setsid is one, and
    // it touches no memory of this process. It fails only for a process group leader, which a
    // child just forked is not.
    unsafe {
        cmd.pre_exec(|| {
            setsid();
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn own_session(_cmd: &mut Command) {}

/// Runs `cmd` with `stdin` to its end, in a session of its own ([`TestEnv::command`] says why).
pub(crate) fn run_command(mut cmd: Command, stdin: &[u8]) -> Run {
    own_session(&mut cmd);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    // The hook may stop reading early (bounded input); a broken pipe here is expected then.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let Output { status, stdout, stderr } = child.wait_with_output().unwrap();
    let _ = writer.join();
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Copies a directory tree, as a plugin install copies a package.
/// The first of `candidates` that is not under /tmp (or the system's temporary directory) and
/// can be made and written.
fn first_outside_tmp(candidates: &[PathBuf]) -> Option<PathBuf> {
    let tmp: Vec<PathBuf> = [PathBuf::from("/tmp"), std::env::temp_dir()]
        .iter()
        .map(|dir| dir.canonicalize().unwrap_or_else(|_| dir.clone()))
        .collect();
    candidates
        .iter()
        .find(|dir| {
            let usable = std::fs::create_dir_all(dir).is_ok()
                && tempfile::Builder::new().prefix("probe-").tempfile_in(dir).is_ok();
            let real = dir.canonicalize().unwrap_or_else(|_| (*dir).clone());
            usable && !tmp.iter().any(|tmp| real.starts_with(tmp))
        })
        .cloned()
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Real agent CLIs (tests/clients).

/// The longest a test waits for something to happen: nextest's own limit for a test
/// (`.config/nextest.toml`: 60 s, ten times). A deadline shorter than that fails a loaded
/// machine, not the code; a wait for an event that never comes still ends, as a failure.
pub(crate) const PATIENCE: Duration = Duration::from_secs(600);

/// The longest one CLI run may take before the test fails instead of hanging CI.
pub(crate) const RUN_LIMIT: Duration = PATIENCE;

/// The repository root: the Claude Code plugin, and the home of `plugin/` and `tests/clients`.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The python with pytest that scripts/test installs. Missing, the tests that need it fail.
pub(crate) fn python() -> PathBuf {
    let path = std::env::var_os("FOR_LOOP_PYTHON")
        .map_or_else(|| repo().join(".cache/test-python/bin/python"), PathBuf::from);
    assert!(
        path.exists(),
        "no python with pytest at {}: run scripts/install-test-python (scripts/test does), or set FOR_LOOP_PYTHON",
        path.display()
    );
    path
}

/// An agent CLI the end-to-end tests drive: `$env_var` when set (the path of that one CLI), else
/// `node_modules/.bin/NAME` under `$FOR_LOOP_CLIENTS_DIR` when set (an absolute path to a directory
/// laid out like tests/clients; `scripts/test-latest-clients` points it at the newest published
/// CLIs), else the pinned one in tests/clients. A missing CLI fails the test with instructions:
/// it is never a silent pass. To leave the end-to-end tests out on purpose, filter them out
/// (`scripts/test` does with `FOR_LOOP_SKIP_E2E=1`), so they are reported as skipped.
pub(crate) fn client_bin(name: &str, env_var: &str) -> PathBuf {
    let (path, install) = match (std::env::var_os(env_var), std::env::var_os("FOR_LOOP_CLIENTS_DIR")) {
        (Some(path), _) => (PathBuf::from(path), format!("set {env_var} to where it is")),
        (None, dir) => (
            clients_dir(dir).join("node_modules/.bin").join(name),
            "run scripts/install-test-clients (scripts/test does), or scripts/test-latest-clients for the \
             newest published CLIs"
                .to_string(),
        ),
    };
    assert!(
        path.exists(),
        "the {name} CLI is not installed at {}: {install}, or leave the end-to-end tests out with \
         FOR_LOOP_SKIP_E2E=1 scripts/test",
        path.display()
    );
    path
}

/// Where the agent CLIs are installed, given `$FOR_LOOP_CLIENTS_DIR`: that directory, which must
/// be absolute (tests run in directories of the runner's choosing), or tests/clients.
fn clients_dir(var: Option<std::ffi::OsString>) -> PathBuf {
    let Some(dir) = var else { return repo().join("tests/clients") };
    let dir = PathBuf::from(dir);
    assert!(dir.is_absolute(), "FOR_LOOP_CLIENTS_DIR must be an absolute path, not {}", dir.display());
    dir
}

/// PATH without any directory holding a `loop-hook`, so a binary installed on the machine cannot
/// stand in for the one a test provides (or withholds).
pub(crate) fn path_without_loop_hook() -> std::ffi::OsString {
    mock_model::path_without(&["loop-hook"])
}

/// Runs `cmd` with `stdin` to completion within [`RUN_LIMIT`]; a run past it is killed and the
/// test fails.
pub(crate) fn run_bounded(cmd: Command, what: &str, stdin: &[u8]) -> Output {
    run_within(cmd, what, stdin, RUN_LIMIT)
}

/// Runs `cmd` with `stdin` to completion within `limit`; a run past it is killed and the test
/// fails, so a hang shows as a failure that names it.
pub(crate) fn run_within(mut cmd: Command, what: &str, stdin: &[u8], limit: Duration) -> Output {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("could not start {what}: {e}"));
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    // Dropping the pipe after writing closes it, so a CLI reading stdin sees its end.
    std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let pid = child.id();
    let started = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() {
        if started.elapsed() > limit {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("{what} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    waiter.join().unwrap().unwrap()
}

/// The Codex tests' directory is never under /tmp, even when the checkout and `$HOME` are.
#[test]
fn the_codex_tests_get_a_directory_outside_tmp() {
    let under_tmp = std::env::temp_dir().join("for-loop-tests-under-tmp");
    assert_eq!(first_outside_tmp(std::slice::from_ref(&under_tmp)), None);
    let env = TestEnv::outside_tmp();
    let real = env.project.canonicalize().unwrap();
    for tmp in [PathBuf::from("/tmp"), std::env::temp_dir()] {
        assert!(!real.starts_with(tmp.canonicalize().unwrap_or(tmp)), "{}", real.display());
    }
    assert_eq!(first_outside_tmp(&[under_tmp.clone(), env.project.clone()]), Some(env.project.clone()));
    std::fs::remove_dir(under_tmp).unwrap();
}

/// A pinned CLI that is not installed fails the test that needs it, whatever the environment
/// says: skipping is the runner's job (a filter), never a silent pass.
#[test]
#[should_panic(expected = "the no-such-agent CLI is not installed")]
fn a_missing_agent_cli_fails_the_test() {
    client_bin("no-such-agent", "FOR_LOOP_TEST_NO_SUCH_AGENT");
}

/// The CLIs are the pinned ones in tests/clients unless `FOR_LOOP_CLIENTS_DIR` names another
/// installation, which `scripts/test-latest-clients` does for the newest published ones.
#[test]
fn the_clients_directory_is_tests_clients_unless_another_is_named() {
    assert_eq!(clients_dir(None), repo().join("tests/clients"));
    assert_eq!(clients_dir(Some("/opt/clients".into())), Path::new("/opt/clients"));
    let relative = std::panic::catch_unwind(|| clients_dir(Some("clients".into())));
    assert!(relative.is_err(), "a relative FOR_LOOP_CLIENTS_DIR was taken");
}

/// `sha256:<hex>` of `bytes`, as ledger lines name the state they vouch for.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex(&sha2::Sha256::digest(bytes)))
}

/// Lowercase hexadecimal of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Runs git in `dir` with a fixed identity and no signing, and returns its stdout; a failure
/// fails the test with git's message.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgSign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `code` (python) run from base64, as a model that was refused once would send it: neither the
/// guard nor a reader of the command line sees what it writes.
pub(crate) fn python_base64(code: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::new();
    for chunk in code.as_bytes().chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            let sextet = (n >> (18 - 6 * i)) as usize & 63;
            encoded.push(if i <= chunk.len() { char::from(ALPHABET[sextet]) } else { '=' });
        }
    }
    format!("python3 -c \"import base64; exec(base64.b64decode('{encoded}'))\"")
}
