//! Codex with `plugin/codex` installed from the `plugin/` marketplace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mock_model::{Agent, MockModel, Script};

use super::{only_session, run_text};
use crate::util::{TestEnv, client_bin, repo};

mod watch;

/// What Codex says when the Stop hook it would skip is the one a loop needs.
const UNTRUSTED: &str = "Codex has no trust record for for-loop's Stop hook";

/// A project with a check that passes once `fixed` exists, loop-hook installed as `cargo install`
/// leaves it (in `~/.cargo/bin`, which is not on the PATH of Codex's login shell), and Codex with
/// the plugin installed from `plugin/` the way users install it.
struct Installed {
    env: TestEnv,
    codex: PathBuf,
    codex_home: PathBuf,
    /// Where Codex puts the plugin: the skill's path names it, and `PLUGIN_ROOT` is read from it.
    plugin_root: PathBuf,
}

/// Codex's sandbox will not set itself up under /tmp, and lets commands write /tmp: the Codex home
/// and the loop store live outside it.
fn project() -> TestEnv {
    TestEnv::outside_tmp()
}

/// The skill's command for `env`, with `PLUGIN_ROOT` read from the skill's path.
fn launcher(env: &TestEnv) -> String {
    format!("sh \"{}\"", plugin_root(env).join("scripts/loop-hook").display())
}

/// Where Codex puts the plugin: the skill's path names it.
fn plugin_root(env: &TestEnv) -> PathBuf {
    env.home.join("codex-home/plugins/cache/for-loop/for-loop").join(env!("CARGO_PKG_VERSION"))
}

impl Installed {
    fn new(env: TestEnv, model: &MockModel) -> Installed {
        let codex = client_bin("codex", "FOR_LOOP_CODEX");
        env.write("check.sh", "test -f fixed || { echo 'FAIL: fixed is missing'; exit 1; }\n");
        let cargo_bin = env.home.join(".cargo/bin");
        std::fs::create_dir_all(&cargo_bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_loop-hook"), cargo_bin.join("loop-hook")).unwrap();
        let codex_home = env.home.join("codex-home");
        std::fs::create_dir_all(&codex_home).unwrap();
        std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
        let plugin_root = plugin_root(&env);
        let installed = Installed { env, codex, codex_home, plugin_root };
        let marketplace = repo().join("plugin");
        for args in [
            vec!["plugin", "marketplace", "add", marketplace.to_str().unwrap()],
            vec!["plugin", "add", "for-loop@for-loop"],
        ] {
            let mut cmd = installed.command(model, &installed.codex);
            cmd.args(&args);
            let (stdout, stderr) = run_text(cmd, "codex plugin", b"");
            assert!(stdout.contains("Added"), "codex {args:?}: {stdout}\n{stderr}");
        }
        installed
    }

    /// `program` run as the user runs Codex: loop-hook is not on PATH.
    fn command(&self, model: &MockModel, program: &Path) -> Command {
        let mut cmd = model.agent_command(
            program,
            Agent::Codex { codex_home: &self.codex_home },
            &self.env.home,
            &["loop-hook"],
        );
        cmd.current_dir(&self.env.project);
        cmd
    }

    /// `codex exec` of the user's prompt under the default `workspace-write` sandbox.
    fn exec(&self, model: &MockModel, extra: &[&str], prompt: &str) -> String {
        let mut cmd = self.command(model, &self.codex);
        cmd.args(["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"])
            .args(extra)
            .arg(prompt);
        let (stdout, stderr) = run_text(cmd, "codex", b"");
        format!("{stdout}\n--- stderr:\n{stderr}")
    }
}

/// Codex under its own `workspace-write` sandbox, where the agent's shell cannot write the loop
/// store. The user's `$for-loop:for-loop` prompt puts the skill, with its path, in front of the
/// model and starts the loop through the plugin's `UserPromptSubmit` hook, which runs outside that
/// sandbox: the typed text reaches loop-hook unchanged, as JSON, so a line that a heredoc would end
/// at is just text. The model runs the skill's command through the plugin's launcher, found from
/// the skill's path, and sees the task and that the Stop hook is not trusted (this run bypasses
/// trust instead); it tries to cancel the loop and delete the store from its shell (both fail),
/// claims done, is held with the task as the continuation prompt, fixes it, and verify passes.
#[test]
fn codex_holds_the_loop_until_verify_passes() {
    let task =
        "create the file named fixed; \"quotes\" $(stay) `as typed`\nFOR_LOOP_TASK_TEXT_END\nstill the task";
    let env = project();
    let launcher = launcher(&env);
    let attack = format!(
        "{launcher} shown for-loop --exit-zero; {launcher} cancel; \
         python3 -c 'import shutil; shutil.rmtree(\"{store}\")'",
        store = env.store().display()
    );
    let model = MockModel::start(
        Script::new().bash(attack).text("I have finished the task.").bash("touch fixed").text("Fixed it."),
    )
    .unwrap();
    let installed = Installed::new(env, &model);
    let env = &installed.env;
    let started = Instant::now();
    let dump = installed.exec(
        &model,
        // Hooks run only once their definition is trusted; this run skips that instead.
        &["--dangerously-bypass-hook-trust"],
        &format!("$for-loop:for-loop {task} --verify \"sh check.sh\" --max-iterations 5"),
    );
    let requests = model.main_requests();
    assert_eq!(requests.len(), 4, "{dump}");
    let offered = requests[0].body.to_string();
    assert!(offered.contains("Start a verified loop in this session"), "the plugin's skill is not offered");
    let skill_path = installed.plugin_root.join("skills/for-loop/SKILL.md");
    assert!(
        offered.contains(&format!("<path>{}</path>", skill_path.display())),
        "the skill and its path are not shown to the model: {offered}"
    );
    assert!(offered.contains("sh \\\"PLUGIN_ROOT/scripts/loop-hook\\\" shown for-loop"), "{offered}");
    let attacked = requests[1].body.to_string();
    assert!(
        attacked.contains("create the file named fixed"),
        "the skill's command did not show the task: {dump}"
    );
    assert!(attacked.contains(UNTRUSTED), "no warning that the Stop hook is not trusted: {dump}");
    assert!(attacked.contains("only from the user's own prompt"), "the agent's cancel ran: {dump}");
    assert!(attacked.contains("Read-only file system"), "the store was writable in the sandbox: {dump}");
    let fed = requests[2].last_user_text().unwrap_or_default();
    assert!(fed.contains(&format!("{task}\n")), "the task was not re-injected verbatim: {fed}\n{dump}");
    assert!(fed.contains("FAIL: fixed is missing"), "{fed}");
    // Codex names the hook that continued the turn: the installed plugin's.
    assert!(fed.contains("plugins/cache/for-loop/for-loop/"), "not the plugin's hook: {fed}");
    let session = only_session(env);
    assert!(dump.contains(&format!("\"thread_id\":\"{session}\"")), "the loop is not this thread's: {dump}");
    // The refusal could not be written from inside the sandbox: the store is read-only there.
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
    assert!(env.project.join("fixed").exists());
    assert_eq!(model.exhausted_requests(), 0);
    eprintln!("codex loop took {:?}", started.elapsed());
}

/// The documented non-interactive trust: `scripts/trust-hooks` records for-loop's hooks as
/// trusted through Codex's app server, after which Codex runs them with no bypass flag, the start
/// gives no warning, and the Stop hook holds the loop until verify passes.
#[test]
fn codex_runs_the_hooks_trust_hooks_recorded_without_a_bypass() {
    let env = project();
    let model = MockModel::start(
        Script::new()
            .bash(format!("{} shown for-loop --exit-zero", launcher(&env)))
            .text("Done.")
            .bash("touch fixed")
            .text("Fixed it."),
    )
    .unwrap();
    let installed = Installed::new(env, &model);
    let env = &installed.env;
    let mut trust = installed.command(&model, Path::new("sh"));
    trust.arg(installed.plugin_root.join("scripts/trust-hooks")).env("CODEX", &installed.codex);
    let (said, stderr) = run_text(trust, "trust-hooks", b"");
    assert!(
        said.contains("for-loop: Codex trusts for-loop@for-loop:hooks/hooks.json:stop:0:0"),
        "{said}\n{stderr}"
    );
    assert!(said.contains(":user_prompt_submit:"), "{said}");
    let dump = installed.exec(
        &model,
        &[],
        "$for-loop:for-loop create the file named fixed --verify \"sh check.sh\"",
    );
    let requests = model.main_requests();
    assert_eq!(requests.len(), 4, "{dump}");
    let shown = requests[1].body.to_string();
    assert!(shown.contains("create the file named fixed"), "the loop did not start: {dump}");
    assert!(!shown.contains(UNTRUSTED), "warned although trusted: {dump}");
    let session = only_session(env);
    assert_eq!(env.ledger_reasons(&session), ["verify_failed", "verified"], "{dump}");
}
