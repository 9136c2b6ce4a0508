//! `loop-hook doctor` on fake homes, one per host: each silent failure that lets a loop end
//! without holding the agent is reported with its fix and fails the run, and the same home
//! with the fix applied passes.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{TestEnv, repo, run_command};

/// `loop-hook doctor --host HOST --json` with PATH holding only the home's own `bin`, and
/// `$FOR_LOOP_BIN` naming this build (where the hooks without a launcher look first).
fn doctor(env: &TestEnv, host: &str, vars: &[(&str, &str)]) -> (i32, Vec<Value>) {
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut cmd = env.command(&["doctor", "--host", host, "--json"]);
    cmd.env("PATH", &bin).env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"));
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let run = run_command(cmd, b"");
    let report: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
    assert_eq!(report["ok"], run.code == 0, "{report}");
    (run.code, report["checks"].as_array().unwrap().clone())
}

/// The check named `name`.
fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

/// Asserts the check `name` fails, counts, and has a fix containing `fix`.
fn assert_fails(code: i32, checks: &[Value], name: &str, fix: &str) {
    let found = check(checks, name);
    assert_eq!((found["ok"].as_bool(), found["matters"].as_bool()), (Some(false), Some(true)), "{found}");
    assert!(found["fix"].as_str().unwrap_or_default().contains(fix), "{found}");
    assert_eq!(code, 1, "{checks:#?}");
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A Claude Code home with for-loop installed and `enabledPlugins` set to `enabled`.
fn claude_home(env: &TestEnv, enabled: bool, extra: &Value) -> PathBuf {
    let config = env.home.join(".claude");
    let root = config.join("plugins/cache/for-loop/for-loop/0.1.0");
    write(
        &root.join("scripts/loop-hook"),
        &std::fs::read_to_string(repo().join("plugin/claude-code/scripts/loop-hook")).unwrap(),
    );
    let installed =
        json!({"version": 2, "plugins": {"for-loop@for-loop": [{"scope": "user", "installPath": root}]}});
    write(&config.join("plugins/installed_plugins.json"), &installed.to_string());
    let mut settings = json!({"enabledPlugins": {"for-loop@for-loop": enabled}});
    settings.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    write(&config.join("settings.json"), &settings.to_string());
    config
}

#[test]
fn claude_code_plugin_not_enabled_fails_and_enabled_passes() {
    let env = TestEnv::new();
    claude_home(&env, false, &json!({}));
    let (code, checks) = doctor(&env, "claude-code", &[]);
    assert_fails(code, &checks, "claude-code: enabled", "claude plugin enable for-loop@for-loop");
    claude_home(&env, true, &json!({}));
    let (code, checks) = doctor(&env, "claude-code", &[]);
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(check(&checks, "claude-code: binary")["ok"], true, "the plugin's launcher runs $FOR_LOOP_BIN");
}

#[test]
fn disable_all_hooks_in_project_settings_fails_naming_the_file() {
    let env = TestEnv::new();
    claude_home(&env, true, &json!({}));
    let local = env.project.join(".claude/settings.local.json");
    write(&local, r#"{"disableAllHooks": true}"#);
    let (code, checks) = doctor(&env, "claude-code", &[]);
    assert_fails(code, &checks, "claude-code: hooks on", &format!("from {}", local.display()));
}

#[test]
fn the_strict_tier_without_bubblewrap_fails_when_claude_codes_sandbox_asks_for_it() {
    let env = TestEnv::new();
    let sandbox =
        json!({"sandbox": {"enabled": true, "allowUnsandboxedCommands": false, "failIfUnavailable": true}});
    claude_home(&env, true, &sandbox);
    // PATH holds only the home's empty bin: no bwrap, no socat.
    let (code, checks) = doctor(&env, "claude-code", &[]);
    assert_fails(code, &checks, "claude-code: tier", "bubblewrap");
    let detail = check(&checks, "claude-code: tier")["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("verify cannot be sandboxed"), "{detail}");
}

#[test]
fn codex_hooks_not_trusted_fail_with_the_trust_script() {
    let env = TestEnv::new();
    let codex = env.home.join(".codex");
    let root = codex.join("plugins/cache/for-loop/for-loop/0.1.0");
    for file in ["hooks/hooks.json", "scripts/loop-hook", "scripts/trust-hooks"] {
        write(&root.join(file), &std::fs::read_to_string(repo().join("plugin/codex").join(file)).unwrap());
    }
    let config = "[plugins.\"for-loop@for-loop\"]\nenabled = true\n";
    write(&codex.join("config.toml"), config);
    let (code, checks) = doctor(&env, "codex", &[]);
    assert_fails(
        code,
        &checks,
        "codex: Stop hook trusted",
        &format!("sh {}", root.join("scripts/trust-hooks").display()),
    );
    let trusted = format!(
        "{config}\n[hooks.state.\"for-loop@for-loop:hooks/hooks.json:user_prompt_submit:0:0\"]\ntrusted_hash = \"sha256:1\"\n\
         \n[hooks.state.\"for-loop@for-loop:hooks/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:2\"\n"
    );
    write(&codex.join("config.toml"), &trusted);
    let (code, checks) = doctor(&env, "codex", &[]);
    assert_eq!(code, 0, "{checks:#?}");
}

#[test]
fn a_gemini_folder_not_trusted_fails_until_trusted_folders_names_it() {
    let env = TestEnv::new();
    let gemini = env.home.join(".gemini");
    let extension = gemini.join("extensions/for-loop");
    for file in ["gemini-extension.json", "scripts/loop-hook"] {
        write(
            &extension.join(file),
            &std::fs::read_to_string(repo().join("plugin/gemini-cli").join(file)).unwrap(),
        );
    }
    let (code, checks) = doctor(&env, "gemini-cli", &[]);
    assert_fails(code, &checks, "gemini-cli: folder trusted", "TRUST_FOLDER");
    let project = std::fs::canonicalize(&env.project).unwrap();
    write(
        &gemini.join("trustedFolders.json"),
        &json!({project.to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    );
    let (code, checks) = doctor(&env, "gemini-cli", &[]);
    assert_eq!(code, 0, "{checks:#?}");
}

#[test]
fn copilot_repository_hooks_need_trust_for_headless_runs() {
    let env = TestEnv::new();
    let hook = std::fs::read_to_string(repo().join("plugin/copilot-cli/for-loop.json")).unwrap();
    write(&env.project.join(".github/hooks/for-loop.json"), &hook);
    let (code, checks) = doctor(&env, "copilot-cli", &[]);
    assert_fails(code, &checks, "copilot-cli: installed", "/.copilot/hooks/");
    assert!(check(&checks, "copilot-cli: installed")["detail"].as_str().unwrap().contains("--trust-folder"));
    let (code, checks) = doctor(&env, "copilot-cli", &[("COPILOT_ALLOW_ALL", "true")]);
    assert_eq!(code, 0, "{checks:#?}");
    write(&env.home.join(".copilot/hooks/for-loop.json"), &hook);
    let (code, checks) = doctor(&env, "copilot-cli", &[]);
    assert_eq!(code, 0, "{checks:#?}");
}

/// opencode: without the plugin the loop never holds; with it but without a command file the
/// user cannot run that command; with both, as docs/hosts.md installs them, doctor passes.
#[test]
fn opencode_needs_the_plugin_and_the_command_files() {
    let env = TestEnv::new();
    let config = env.home.join(".config/opencode");
    let (code, checks) = doctor(&env, "opencode", &[]);
    assert_fails(code, &checks, "opencode: installed", "/plugin/opencode/plugins/*");
    let shipped = repo().join("plugin/opencode");
    let plugin = std::fs::read_to_string(shipped.join("plugins/for-loop.js")).unwrap();
    write(&config.join("plugins/for-loop.js"), &plugin);
    let (code, checks) = doctor(&env, "opencode", &[]);
    assert_fails(code, &checks, "opencode: commands", "/plugin/opencode/commands/*");
    for name in ["for-loop", "cancel-loop", "loop-status", "resume-loop"] {
        let text = std::fs::read_to_string(shipped.join(format!("commands/{name}.md"))).unwrap();
        write(&env.project.join(format!(".opencode/commands/{name}.md")), &text);
    }
    let (code, checks) = doctor(&env, "opencode", &[]);
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(check(&checks, "opencode: binary")["ok"], true);
}

#[test]
fn an_old_binary_first_on_path_fails_with_its_version() {
    let env = TestEnv::new();
    let old = env.home.join("bin/loop-hook");
    write(&old, "#!/bin/sh\necho 'loop-hook 0.0.1'\n");
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, checks) = doctor(&env, "copilot-cli", &[]);
    assert_fails(code, &checks, "binary on PATH", &format!("rm {}", old.display()));
    let detail = check(&checks, "binary on PATH")["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("loop-hook 0.0.1 at") && detail.contains("comes first on PATH"), "{detail}");
}

#[test]
fn a_store_that_cannot_be_written_fails() {
    let env = TestEnv::new();
    let in_the_way = env.home.join("not-a-directory");
    write(&in_the_way, "x");
    let store = in_the_way.join("for-loop");
    let (code, checks) = doctor(&env, "copilot-cli", &[("FOR_LOOP_HOME", store.to_str().unwrap())]);
    assert_fails(code, &checks, "store", &format!("mkdir -p {}", store.display()));
}

#[test]
fn the_text_report_marks_each_line_and_prints_the_fix_under_a_failure() {
    let env = TestEnv::new();
    claude_home(&env, false, &json!({}));
    let mut cmd = env.command(&["doctor", "--host=claude-code"]);
    cmd.env("PATH", env.home.join("bin")).env("FOR_LOOP_BIN", env!("CARGO_BIN_EXE_loop-hook"));
    let run = run_command(cmd, b"");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("✓ store: "), "{}", run.stdout);
    assert!(run.stdout.contains("✗ claude-code: enabled: "), "{}", run.stdout);
    assert!(run.stdout.contains("\n    fix: claude plugin enable for-loop@for-loop\n"), "{}", run.stdout);
    let exit_zero = env.command(&["doctor", "--host", "claude-code", "--exit-zero"]);
    assert_eq!(run_command(exit_zero, b"").code, 0);
}

#[test]
fn with_no_host_and_no_plugin_doctor_says_so_and_lists_what_it_sees() {
    let env = TestEnv::new();
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let doctor = || {
        let mut cmd = env.command(&["doctor"]);
        cmd.env("PATH", &bin);
        run_command(cmd, b"")
    };
    let run = doctor();
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(!run.stdout.contains("Everything a loop needs here is in place"), "{}", run.stdout);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[1].starts_with("✗ installed: no agent host is installed here"), "{}", run.stdout);
    assert!(lines[2].starts_with("    fix: install an agent host first"), "{}", run.stdout);
    assert!(
        lines.last().unwrap().starts_with("for-loop is not installed for any agent host here"),
        "{}",
        run.stdout
    );
    // A project's settings that would switch the plugin's hooks off are listed before it is installed.
    let settings = env.project.join(".claude/settings.json");
    write(&settings, r#"{"disableAllHooks": true}"#);
    let run = doctor();
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!("✗ claude-code: hooks on: {} sets disableAllHooks", settings.display())),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("✗ claude-code: installed: the for-loop plugin is not installed"),
        "{}",
        run.stdout
    );
}

/// Qwen Code: not installed says how to install; installed with the default cap of 8 is told
/// (not a failure: a loop up to 8 holds exactly) with the setting that raises it; hooks turned
/// off in settings fail naming the file; the install docs/hosts.md gives passes.
#[test]
fn qwen_code_install_hooks_and_block_cap() {
    let env = TestEnv::new();
    let (code, checks) = doctor(&env, "qwen-code", &[]);
    assert_fails(code, &checks, "qwen-code: installed", "qwen extensions install");
    let qwen = env.home.join(".qwen");
    let extension = qwen.join("extensions/for-loop");
    for file in ["qwen-extension.json", "hooks/hooks.json", "scripts/loop-hook"] {
        write(
            &extension.join(file),
            &std::fs::read_to_string(repo().join("plugin/qwen-code").join(file)).unwrap(),
        );
    }
    let (code, checks) = doctor(&env, "qwen-code", &[]);
    let cap = check(&checks, "qwen-code: block cap");
    assert_eq!((cap["ok"].as_bool(), cap["matters"].as_bool()), (Some(false), Some(false)), "{cap}");
    assert!(cap["fix"].as_str().unwrap().contains("\"stopHookBlockingCap\": 100"), "{cap}");
    assert_eq!(code, 0, "{checks:#?}");
    write(
        &qwen.join("settings.json"),
        &json!({"stopHookBlockingCap": 100, "disableAllHooks": true}).to_string(),
    );
    let (code, checks) = doctor(&env, "qwen-code", &[]);
    assert_fails(code, &checks, "qwen-code: hooks on", "disableAllHooks");
    assert_eq!(check(&checks, "qwen-code: block cap")["ok"], true);
    write(&qwen.join("settings.json"), &json!({"stopHookBlockingCap": 100}).to_string());
    let (code, checks) = doctor(&env, "qwen-code", &[]);
    assert_eq!(code, 0, "{checks:#?}");
    // The variable beats the settings, as in Qwen Code.
    let (_, checks) = doctor(&env, "qwen-code", &[("QWEN_CODE_STOP_HOOK_BLOCK_CAP", "5")]);
    assert!(check(&checks, "qwen-code: block cap")["detail"].as_str().unwrap().contains("after 5 blocked"));
    write(
        &qwen.join("extensions/extension-enablement.json"),
        &json!({"for-loop": {"overrides": ["!/*"]}}).to_string(),
    );
    let (code, checks) = doctor(&env, "qwen-code", &[]);
    assert_fails(code, &checks, "qwen-code: enabled", "qwen extensions enable for-loop");
}
