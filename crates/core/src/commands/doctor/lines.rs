//! The judgement: facts in, one line per check out, each with what fixes it. Pure, so every
//! silent failure is tested here without a filesystem.

use std::path::Path;

use super::facts::OpencodeFacts;
use super::facts::{
    AntigravityFacts, Binary, BinaryFacts, ClaudeFacts, CodexFacts, CopilotFacts, CursorFacts, Facts,
    FolderTrust, GeminiFacts, HookFile, Launch, LoopKind, QwenFacts, StoreFacts, TierFacts,
};
use crate::host::Host;

/// The line for a binary that is not installed anywhere a hook looks.
const INSTALL: &str = "cargo install --locked --path <for-loop checkout>";

/// One check: what was looked at, whether it passed, and the command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
    /// A failure here keeps a loop from holding (exit 1); otherwise it is worth knowing only.
    pub matters: bool,
}

impl Check {
    fn pass(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check { name: name.into(), ok: true, detail: detail.into(), fix: None, matters: true }
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { name: name.into(), ok: false, detail: detail.into(), fix: Some(fix.into()), matters: true }
    }

    /// A failure that does not stop a loop from holding.
    fn minor(self) -> Check {
        Check { matters: false, ..self }
    }
}

/// Every check, in the order they are shown.
pub(crate) fn lines(facts: &Facts) -> Vec<Check> {
    let mut out: Vec<Check> = nothing_installed(facts).into_iter().collect();
    out.extend(binary_lines(&facts.binary));
    out.push(store_line(&facts.store));
    let wanted = |host: Host| facts.asked.is_none_or(|asked| asked == host);
    let asked = |host: Host| facts.asked == Some(host);
    if let Some(claude) = facts.claude.as_ref().filter(|_| wanted(Host::ClaudeCode)) {
        out.extend(claude_lines(claude, &facts.binary, asked(Host::ClaudeCode)));
        out.push(tier_line(&facts.tier));
    }
    if let Some(gemini) = facts.gemini.as_ref().filter(|_| wanted(Host::GeminiCli)) {
        out.extend(gemini_lines(gemini, &facts.project, &facts.binary, asked(Host::GeminiCli)));
    }
    if let Some(codex) = facts.codex.as_ref().filter(|_| wanted(Host::Codex)) {
        out.extend(codex_lines(codex, &facts.binary, asked(Host::Codex)));
    }
    if let Some(copilot) = facts.copilot.as_ref().filter(|_| wanted(Host::CopilotCli)) {
        out.extend(copilot_lines(copilot, &facts.binary, asked(Host::CopilotCli)));
    }
    if let Some(cursor) = facts.cursor.as_ref().filter(|_| wanted(Host::Cursor)) {
        out.extend(cursor_lines(cursor, &facts.binary, asked(Host::Cursor)));
    }
    if let Some(antigravity) = facts.antigravity.as_ref().filter(|_| wanted(Host::Antigravity)) {
        out.extend(antigravity_lines(antigravity, &facts.binary, asked(Host::Antigravity)));
    }
    if let Some(opencode) = facts.opencode.as_ref().filter(|_| wanted(Host::Opencode)) {
        out.extend(opencode_lines(opencode, &facts.binary, asked(Host::Opencode)));
    }
    if let Some(qwen) = facts.qwen.as_ref().filter(|_| wanted(Host::QwenCode)) {
        out.extend(qwen_lines(qwen, &facts.binary, asked(Host::QwenCode)));
    }
    out.extend(loop_lines(facts));
    out.extend(facts.containment.map(containment_line));
    out
}

/// Where a judged command's output ends: at its exit in a PID namespace; a moment after it
/// otherwise, which a process it left behind can race (worth knowing, not a fault of the loop).
fn containment_line(containment: crate::checks::verify::Containment) -> Check {
    use crate::checks::verify::Containment;
    let detail = format!("{} ({})", containment.words(), containment.name());
    match containment {
        Containment::Namespace => Check::pass("output ends with its command", detail),
        _ if cfg!(target_os = "linux") => Check::fail(
            "output ends with its command",
            detail,
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu, \
             kernel.apparmor_restrict_unprivileged_userns=0), or run the hooks as root",
        )
        .minor(),
        _ => Check::pass("output ends with its command", detail),
    }
}

/// The name of the check that fails when for-loop is installed for no host at all.
pub(crate) const NOTHING_INSTALLED: &str = "installed";

/// With no `--host`, and for-loop installed for none of the hosts here, no loop can hold: the
/// first line says so, and what to install first.
fn nothing_installed(facts: &Facts) -> Option<Check> {
    if facts.asked.is_some() || installed_hosts(facts) > 0 {
        return None;
    }
    let claude = format!("Claude Code's plugin: {}", claude_install(&facts.binary));
    Some(if facts.hosts_found.is_empty() {
        Check::fail(
            NOTHING_INSTALLED,
            "no agent host is installed here (none of claude, gemini, codex, copilot, cursor-agent, agy, \
             opencode or qwen is on PATH, nor their settings directories), so nothing runs for-loop's hooks",
            format!(
                "install an agent host first, e.g. Claude Code (npm install -g @anthropic-ai/claude-code), then {claude}"
            ),
        )
    } else {
        let names: Vec<&str> = facts.hosts_found.iter().map(|host| host.name()).collect();
        Check::fail(
            NOTHING_INSTALLED,
            format!(
                "for-loop is installed for none of the hosts here ({}), so nothing runs its hooks",
                names.join(", ")
            ),
            if facts.hosts_found.contains(&Host::ClaudeCode) {
                format!("install {claude} (or another host's package: the `installed` lines below)")
            } else {
                "install for-loop for one of them: the fix under its `installed` line below".to_string()
            },
        )
    })
}

/// How many hosts here run for-loop's hooks, installed well or not.
fn installed_hosts(facts: &Facts) -> usize {
    [
        facts.claude.as_ref().is_some_and(|c| !c.installed.is_empty()),
        facts.gemini.as_ref().is_some_and(|g| g.extension.is_some()),
        facts.codex.as_ref().is_some_and(|c| c.plugin_root.is_some()),
        facts.copilot.as_ref().is_some_and(|c| c.user_hook.is_some() || c.repo_hook.is_some()),
        facts.cursor.as_ref().is_some_and(|c| c.user_hook.is_some() || c.project_hook.is_some()),
        facts.antigravity.as_ref().is_some_and(|a| a.plugin_dir.is_some()),
        facts.opencode.as_ref().is_some_and(|o| o.plugin.is_some()),
        facts.qwen.as_ref().is_some_and(|q| q.extension.is_some()),
    ]
    .into_iter()
    .filter(|installed| *installed)
    .count()
}

/// Whether everything that matters passed.
pub(crate) fn all_pass(checks: &[Check]) -> bool {
    checks.iter().all(|check| check.ok || !check.matters)
}

fn binary_lines(binary: &BinaryFacts) -> Vec<Check> {
    let mut out = vec![Check::pass(
        "binary",
        match &binary.this_path {
            Some(path) => format!("loop-hook {} at {}", binary.this_version, path.display()),
            None => format!("loop-hook {}", binary.this_version),
        },
    )];
    if let Some(plugin) = binary.launcher_plugin_version.as_deref().filter(|v| *v != binary.this_version) {
        out.push(Check::fail(
            "binary version",
            format!("the plugin that ran this is {plugin}, but this binary is {}", binary.this_version),
            format!(
                "{INSTALL} from the for-loop {plugin} checkout, or install the plugin of {}",
                binary.this_version
            ),
        ));
    }
    if let Some((value, is_file)) = &binary.for_loop_bin {
        if !is_absolute(value) {
            out.push(Check::fail(
                "FOR_LOOP_BIN",
                format!("FOR_LOOP_BIN={value} is not an absolute path, so every launcher ignores it"),
                "export FOR_LOOP_BIN=/absolute/path/to/loop-hook (or unset FOR_LOOP_BIN)",
            ));
        } else if !is_file {
            out.push(Check::fail(
                "FOR_LOOP_BIN",
                format!("FOR_LOOP_BIN={value} names no file, so the launchers look further"),
                "unset FOR_LOOP_BIN, or point it at a built loop-hook",
            ));
        }
    }
    match &binary.first_on_path {
        Some(found) if found.version.as_deref() != Some(binary.this_version.as_str()) => {
            out.push(version_gap("binary on PATH", "comes first on PATH", found, &binary.this_version));
        }
        Some(found) => {
            out.push(Check::pass("binary on PATH", format!("{} comes first on PATH", found.path.display())));
        }
        None => out.push(
            Check::pass(
                "binary on PATH",
                "no loop-hook on PATH (the plugins' launchers look elsewhere first)",
            )
            .minor(),
        ),
    }
    if let Some(found) = &binary.cargo
        && found.version.as_deref() != Some(binary.this_version.as_str())
    {
        out.push(version_gap(
            "binary from cargo install",
            "is what every launcher runs before a plugin's own binary",
            found,
            &binary.this_version,
        ));
    }
    out
}

/// A binary a hook would run whose version is not this one's.
fn version_gap(name: &str, role: &str, found: &Binary, expected: &str) -> Check {
    let version =
        found.version.as_deref().map_or_else(|| "of unknown version".to_string(), ToString::to_string);
    Check::fail(
        name,
        format!("loop-hook {version} at {} {role}, but this is {expected}", found.path.display()),
        format!("{INSTALL} --force (or remove it: rm {})", shell_quote(&found.path)),
    )
}

fn store_line(store: &StoreFacts) -> Check {
    let Some(root) = &store.root else {
        return Check::fail(
            "store",
            "no place for loop state: neither FOR_LOOP_HOME, XDG_STATE_HOME nor HOME is set",
            "export FOR_LOOP_HOME=/a/writable/directory",
        );
    };
    match &store.writable {
        Ok(()) => Check::pass("store", format!("{} is writable", root.display())),
        Err(why) => Check::fail(
            "store",
            format!("{} is not writable ({why}): every loop start and stop fails there", root.display()),
            format!(
                "mkdir -p {root} && chmod u+rwx {root} (or export FOR_LOOP_HOME=/a/writable/directory)",
                root = shell_quote(root)
            ),
        ),
    }
}

/// What a package's launcher would run, checked against the package's version.
fn launch_line(name: &str, launch: &Launch) -> Check {
    match &launch.runs {
        Err(why) => Check::fail(name, why.clone(), INSTALL),
        Ok((binary, source)) => {
            let runs = format!("{} ({})", binary.path.display(), source_words(source));
            match (&launch.plugin_version, &binary.version) {
                (Some(plugin), Some(version)) if plugin != version => Check::fail(
                    name,
                    format!(
                        "the package at {} is {plugin} but runs loop-hook {version} at {runs}",
                        launch.root.display()
                    ),
                    match *source {
                        "cargo" => format!("{INSTALL} --force from the for-loop {plugin} checkout"),
                        "FOR_LOOP_BIN" => {
                            "rebuild the binary FOR_LOOP_BIN names, or unset FOR_LOOP_BIN".into()
                        }
                        "checkout" => {
                            format!("cargo build --release --locked in {}", shell_quote(&launch.root))
                        }
                        _ => "reinstall the plugin".into(),
                    },
                ),
                (_, None) => Check::fail(
                    name,
                    format!(
                        "the package at {} runs {runs}, which does not answer --version",
                        launch.root.display()
                    ),
                    INSTALL,
                ),
                _ => Check::pass(name, format!("the package at {} runs {runs}", launch.root.display())),
            }
        }
    }
}

fn source_words(source: &str) -> &str {
    match source {
        "FOR_LOOP_BIN" => "set by $FOR_LOOP_BIN",
        "checkout" => "built in the package's checkout",
        "cargo" => "from cargo install",
        "shipped" => "shipped with the package, SHA-256 verified",
        "PATH" => "found on PATH",
        other => other,
    }
}

/// A host where for-loop is not installed: worth a line, and a failure only if it was asked for.
fn not_installed(host: Host, detail: String, fix: String, asked: bool) -> Check {
    let check = Check::fail(format!("{}: installed", host.name()), detail, fix);
    if asked { check } else { check.minor() }
}

/// The Claude Code install from a clone, whose root is the marketplace: the one `cargo install`
/// built this machine's loop-hook from when it is known, else any. A release's repository is
/// not known here, and a placeholder is no fix.
fn claude_install(binary: &BinaryFacts) -> String {
    let clone = binary
        .cargo_checkout
        .as_deref()
        .map_or_else(|| "<a for-loop checkout>".to_string(), |dir| shell_word(&dir.display().to_string()));
    format!("claude plugin marketplace add {clone} && claude plugin install for-loop@for-loop")
}

/// `text` as one shell word: as it is when it needs no quoting, else single-quoted.
fn shell_word(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,".contains(c)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn claude_lines(claude: &ClaudeFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("claude-code: {what}");
    let mut out = Vec::new();
    let Some(id) = claude.installed.first() else {
        // What would switch the plugin's hooks off once it is installed is worth knowing now.
        let off = claude.hooks_disabled_by.iter().map(|file| {
            let check = Check::fail(
                name("hooks on"),
                format!(
                    "{} sets disableAllHooks, so no hook will run there and no loop hold",
                    file.display()
                ),
                format!("remove \"disableAllHooks\": true from {}", file.display()),
            );
            if asked { check } else { check.minor() }
        });
        let missing = not_installed(
            Host::ClaudeCode,
            format!("the for-loop plugin is not installed in {}", claude.config_dir.display()),
            claude_install(binary),
            asked,
        );
        return std::iter::once(missing).chain(off).collect();
    };
    out.push(Check::pass(name("installed"), format!("{id} is installed")));
    out.push(match &claude.enabled {
        Some((_, true)) => Check::pass(name("enabled"), format!("{id} is enabled")),
        Some((file, false)) => Check::fail(
            name("enabled"),
            format!("{} turns {id} off, so none of its hooks run", file.display()),
            format!("claude plugin enable {id}"),
        ),
        None => Check::fail(
            name("enabled"),
            format!("no settings file enables {id}, so none of its hooks run"),
            format!("claude plugin enable {id}"),
        ),
    });
    for file in &claude.hooks_disabled_by {
        out.push(Check::fail(
            name("hooks on"),
            format!("{} sets disableAllHooks, so no hook runs and no loop holds", file.display()),
            format!("remove \"disableAllHooks\": true from {}", file.display()),
        ));
    }
    if claude.hooks_disabled_by.is_empty() {
        out.push(Check::pass(name("hooks on"), "no settings file sets disableAllHooks"));
    }
    for over in &claude.env_overrides {
        let set = format!("{} sets {}={}", over.file.display(), over.name, over.value);
        out.push(if over.in_project {
            Check::fail(
                name("settings env"),
                format!(
                    "{set}: a project file the agent can write decides which {} the hooks use",
                    if over.name == "FOR_LOOP_BIN" { "binary" } else { "loop store" }
                ),
                format!(
                    "remove {} from the env of {} (set it in ~/.claude/settings.json if you need it)",
                    over.name,
                    over.file.display()
                ),
            )
        } else if over.name == "FOR_LOOP_BIN" && !is_absolute(&over.value) {
            Check::fail(
                name("settings env"),
                format!("{set}, which is not an absolute path, so the launcher ignores it"),
                format!("set {} to an absolute path in {}, or remove it", over.name, over.file.display()),
            )
        } else if over.name == "FOR_LOOP_BIN" && !over.is_file {
            Check::fail(
                name("settings env"),
                format!("{set}, which names no file"),
                format!("point {} in {} at a built loop-hook, or remove it", over.name, over.file.display()),
            )
        } else {
            Check::pass(name("settings env"), format!("{set}: every Claude Code hook uses it"))
        });
    }
    match &claude.launch {
        Some(launch) => out.push(launch_line(&name("binary"), launch)),
        None => out.push(standalone_binary(&name("binary"), binary)),
    }
    out
}

fn tier_line(tier: &TierFacts) -> Check {
    let name = "claude-code: tier";
    let needs = "strict needs sandbox.enabled: true, sandbox.allowUnsandboxedCommands: false and \
                 sandbox.failIfUnavailable: true in Claude Code's settings, bubblewrap and socat";
    let packages = "sudo apt-get install bubblewrap socat (or your system's packages of the same names)";
    match &tier.sandbox_settings {
        Err(why) => {
            let tools = match (&tier.bubblewrap, tier.socat || !tier.linux) {
                (None, true) => "bubblewrap and socat are here".to_string(),
                (Some(why), _) => format!("and {why}"),
                (None, false) => "and socat is not installed".to_string(),
            };
            Check::pass(name, format!("default: {why}; {needs}; {tools}")).minor()
        }
        Ok(()) => match (&tier.bubblewrap, tier.socat || !tier.linux) {
            (Some(why), _) => Check::fail(
                name,
                format!(
                    "Claude Code's sandbox is on for the strict tier, but verify cannot be sandboxed: {why}"
                ),
                packages,
            ),
            (None, false) => Check::fail(
                name,
                "Claude Code's sandbox is on for the strict tier, but socat is not installed, which its sandbox needs on Linux",
                packages,
            ),
            (None, true) => {
                Check::pass(name, "strict: Claude Code's sandbox on, verify sandboxed with bubblewrap")
            }
        },
    }
}

fn gemini_lines(gemini: &GeminiFacts, project: &Path, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("gemini-cli: {what}");
    let Some(extension) = &gemini.extension else {
        return vec![not_installed(
            Host::GeminiCli,
            format!("the for-loop extension is not in {}", gemini.home.join("extensions").display()),
            "gemini extensions install <for-loop checkout>/plugin/gemini-cli".into(),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("extension at {}", extension.display()))];
    if gemini.enabled == Some(false) {
        out.push(Check::fail(
            name("enabled"),
            "the for-loop extension is disabled here, so its hooks do not run",
            "gemini extensions enable for-loop",
        ));
    }
    let entry = format!(
        "add \"{}\": \"TRUST_FOLDER\" to {} (or run gemini there and trust the folder; for one run: GEMINI_CLI_TRUST_WORKSPACE=true gemini ...)",
        project.display(),
        gemini.trusted_folders_file.display()
    );
    out.push(match &gemini.trust {
        FolderTrust::Trusted(how) => Check::pass(name("folder trusted"), format!("{} is trusted ({how})", project.display())),
        FolderTrust::NotTrusted => Check::fail(
            name("folder trusted"),
            format!("Gemini CLI does not trust {}: gemini -p refuses to run there and the loop's hooks do not load", project.display()),
            entry,
        ),
        FolderTrust::Distrusted(file) => Check::fail(
            name("folder trusted"),
            format!("{} marks {} DO_NOT_TRUST", file.display(), project.display()),
            entry,
        ),
    });
    match &gemini.launch {
        Some(launch) => out.push(launch_line(&name("binary"), launch)),
        None => out.push(standalone_binary(&name("binary"), binary)),
    }
    out
}

fn qwen_lines(qwen: &QwenFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("qwen-code: {what}");
    let Some(extension) = &qwen.extension else {
        return vec![not_installed(
            Host::QwenCode,
            format!("the for-loop extension is not in {}", qwen.home.join("extensions").display()),
            "qwen extensions install <for-loop checkout>/plugin/qwen-code --consent".into(),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("extension at {}", extension.display()))];
    if qwen.enabled == Some(false) {
        out.push(Check::fail(
            name("enabled"),
            "the for-loop extension is disabled here, so its hooks do not run",
            "qwen extensions enable for-loop",
        ));
    }
    for file in &qwen.hooks_disabled_by {
        out.push(Check::fail(
            name("hooks on"),
            format!("{} sets disableAllHooks, so no stop is judged", file.display()),
            format!("remove \"disableAllHooks\" from {}", file.display()),
        ));
    }
    let settings = qwen.home.join("settings.json");
    let most = crate::host::QWEN_MAX_BLOCK_CAP;
    out.push(if qwen.block_cap >= most {
        Check::pass(
            name("block cap"),
            format!("Qwen Code honours {most} blocked stops in a row: loops of up to {most} iterations"),
        )
    } else {
        Check::fail(
            name("block cap"),
            format!(
                "Qwen Code ends a turn after {} blocked stops in a row, so /for-loop refuses more than \
                 --max-iterations {} (the default is 30)",
                qwen.block_cap, qwen.block_cap
            ),
            format!(
                "add \"{}\": {most} to {}, then restart qwen (unset {} if it is set lower)",
                crate::host::QWEN_BLOCK_CAP_SETTING,
                settings.display(),
                crate::host::QWEN_BLOCK_CAP_VAR
            ),
        )
        .minor()
    });
    match &qwen.launch {
        Some(launch) => out.push(launch_line(&name("binary"), launch)),
        None => out.push(standalone_binary(&name("binary"), binary)),
    }
    out
}

fn codex_lines(codex: &CodexFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("codex: {what}");
    let config = codex.home.join("config.toml");
    let Some(root) = &codex.plugin_root else {
        return vec![not_installed(
            Host::Codex,
            format!("the for-loop plugin is not in {}", codex.home.join("plugins/cache").display()),
            "codex plugin marketplace add <for-loop checkout>/plugin && codex plugin add for-loop@for-loop"
                .into(),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("plugin at {}", root.display()))];
    if codex.plugin_disabled {
        out.push(Check::fail(
            name("enabled"),
            format!("{} disables the for-loop plugin", config.display()),
            format!("set enabled = true under [plugins.\"for-loop@…\"] in {}", config.display()),
        ));
    }
    if codex.hooks_feature_off {
        out.push(Check::fail(
            name("hooks on"),
            format!("{} turns Codex's hooks feature off, so no hook runs", config.display()),
            format!("set hooks = true under [features] in {}", config.display()),
        ));
    }
    let trust = format!("sh {}", shell_quote(&root.join("scripts/trust-hooks")));
    for (trusted, hook, why) in [
        (codex.stop_trusted, "Stop hook", "Codex skips it silently and no loop holds"),
        (
            codex.prompt_trusted,
            "prompt hook",
            "Codex skips it silently and $for-loop:for-loop starts nothing",
        ),
    ] {
        out.push(if trusted {
            Check::pass(
                name(&format!("{hook} trusted")),
                format!("{} trusts for-loop's {hook}", config.display()),
            )
        } else {
            Check::fail(
                name(&format!("{hook} trusted")),
                format!("{} has no trust record for for-loop's {hook}: {why}", config.display()),
                format!("{trust} (or review it in /hooks in a Codex session)"),
            )
        });
    }
    match &codex.launch {
        Some(launch) => out.push(launch_line(&name("binary"), launch)),
        None => out.push(standalone_binary(&name("binary"), binary)),
    }
    out
}

fn copilot_lines(copilot: &CopilotFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("copilot-cli: {what}");
    let user_dir = copilot.home.join("hooks");
    let mut out = Vec::new();
    match (&copilot.user_hook, &copilot.repo_hook) {
        (None, None) => {
            return vec![not_installed(
                Host::CopilotCli,
                format!("no hook file in {} or .github/hooks runs for-loop", user_dir.display()),
                format!(
                    "mkdir -p {dir} && cp <for-loop checkout>/plugin/copilot-cli/for-loop.json {dir}/",
                    dir = shell_quote(&user_dir)
                ),
                asked,
            )];
        }
        (Some(hook), _) => {
            out.push(Check::pass(name("installed"), format!("{} runs for-loop", hook.path.display())));
        }
        (None, Some(hook)) if copilot.allow_all => out.push(Check::pass(
            name("installed"),
            format!("{} runs for-loop (repository hooks load: COPILOT_ALLOW_ALL=true)", hook.path.display()),
        )),
        (None, Some(hook)) => out.push(Check::fail(
            name("installed"),
            format!(
                "{} runs for-loop, but repository hooks load in copilot -p only with --trust-folder or \
                 COPILOT_ALLOW_ALL=true, so a headless loop would not hold",
                hook.path.display()
            ),
            format!("mkdir -p {dir} && cp {} {dir}/", shell_quote(&hook.path), dir = shell_quote(&user_dir)),
        )),
    }
    out.push(standalone_binary(&name("binary"), binary));
    out
}

fn opencode_lines(opencode: &OpencodeFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("opencode: {what}");
    let copy = |what: &str| {
        let dir = opencode.config.join(what);
        format!(
            "mkdir -p {dir} && cp <for-loop checkout>/plugin/opencode/{what}/* {dir}/",
            dir = shell_quote(&dir)
        )
    };
    let Some(plugin) = &opencode.plugin else {
        return vec![not_installed(
            Host::Opencode,
            format!(
                "no plugin of for-loop's in {} or .opencode/plugins: no idle is judged",
                opencode.config.join("plugins").display()
            ),
            copy("plugins"),
            asked,
        )];
    };
    let mut out = vec![Check::pass(name("installed"), format!("{} runs for-loop", plugin.display()))];
    out.push(if opencode.missing_commands.is_empty() {
        Check::pass(name("commands"), "/for-loop, /cancel-loop, /loop-status and /resume-loop are there")
    } else {
        Check::fail(
            name("commands"),
            format!(
                "no command file for /{} in {} or .opencode/commands: opencode does not know the command, so \
                 the plugin never sees it",
                opencode.missing_commands.join(", /"),
                opencode.config.join("commands").display()
            ),
            copy("commands"),
        )
    });
    out.push(standalone_binary(&name("binary"), binary));
    out
}

fn cursor_lines(cursor: &CursorFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("cursor: {what}");
    let hooks: Vec<&HookFile> = cursor.user_hook.iter().chain(&cursor.project_hook).collect();
    if hooks.is_empty() {
        return vec![not_installed(
            Host::Cursor,
            format!(
                "no stop hook of for-loop in {} or .cursor/hooks.json",
                cursor.home.join("hooks.json").display()
            ),
            format!(
                "cp <for-loop checkout>/plugin/cursor/hooks/hooks.json {}",
                shell_quote(&cursor.home.join("hooks.json"))
            ),
            asked,
        )];
    }
    let mut out = Vec::new();
    for hook in hooks {
        out.push(match &hook.limit {
            Some(limit) => Check::fail(
                name("loop_limit"),
                format!(
                    "{} sets loop_limit {limit}: Cursor ends the loop after that many follow-ups",
                    hook.path.display()
                ),
                format!("set \"loop_limit\": null in for-loop's stop hook in {}", hook.path.display()),
            ),
            None => Check::pass(name("installed"), format!("{} runs for-loop", hook.path.display())),
        });
    }
    if cursor.user_hook.is_none() {
        out.push(
            Check::pass(
                name("workspace trust"),
                "project hooks run only in a trusted workspace: trust it in Cursor",
            )
            .minor(),
        );
    }
    out.push(standalone_binary(&name("binary"), binary));
    out
}

fn antigravity_lines(antigravity: &AntigravityFacts, binary: &BinaryFacts, asked: bool) -> Vec<Check> {
    let name = |what: &str| format!("antigravity: {what}");
    let Some(dir) = &antigravity.plugin_dir else {
        return vec![not_installed(
            Host::Antigravity,
            "no for-loop plugin in ~/.gemini/config/plugins or .agents/plugins".into(),
            "mkdir -p ~/.gemini/config/plugins && ln -s <for-loop checkout>/plugin/antigravity ~/.gemini/config/plugins/for-loop && agy plugin validate".into(),
            asked,
        )];
    };
    let mut out = vec![match &antigravity.hooks_problem {
        None => Check::pass(name("installed"), format!("plugin at {}", dir.display())),
        Some(why) => Check::fail(
            name("hooks.json"),
            format!("{why}: Antigravity drops the whole file silently"),
            format!(
                "ln -sfn <for-loop checkout>/plugin/antigravity {} && agy plugin validate",
                shell_quote(dir)
            ),
        ),
    }];
    match &antigravity.launch {
        Some(launch) => out.push(launch_line(&name("binary"), launch)),
        None => out.push(standalone_binary(&name("binary"), binary)),
    }
    // The skills (the slash commands) run loop-hook from PATH or FOR_LOOP_BIN.
    if binary.first_on_path.is_none() && binary.for_loop_bin.is_none() {
        out.push(Check::fail(
            name("skills"),
            "the skills run loop-hook from PATH, and there is none on PATH",
            format!("{INSTALL}, with ~/.cargo/bin on the agent's PATH"),
        ));
    }
    out
}

/// The binary a hook file without a launcher runs: `$FOR_LOOP_BIN`, `~/.cargo/bin`, then PATH.
fn standalone_binary(name: &str, binary: &BinaryFacts) -> Check {
    let set = binary.for_loop_bin.as_ref().filter(|(value, is_file)| is_absolute(value) && *is_file);
    let found = set
        .map(|(value, _)| (value.clone(), "set by $FOR_LOOP_BIN"))
        .or_else(|| binary.cargo.as_ref().map(|b| (b.path.display().to_string(), "from cargo install")))
        .or_else(|| binary.first_on_path.as_ref().map(|b| (b.path.display().to_string(), "found on PATH")));
    match found {
        Some((path, source)) => Check::pass(name, format!("its hook runs {path} ({source})")),
        None => Check::fail(
            name,
            "its hook looks in $FOR_LOOP_BIN, ~/.cargo/bin and PATH, and finds no loop-hook: every stop is allowed",
            INSTALL,
        ),
    }
}

fn loop_lines(facts: &Facts) -> Vec<Check> {
    facts
        .loops
        .iter()
        .map(|found| {
            let id = &found.session_id;
            let name = format!("loop {id}");
            let check = match found.kind {
                LoopKind::Parked => Check::fail(
                    name,
                    format!("a {} loop of this project is parked (idle {} h)", found.host.name(), found.idle_hours),
                    format!("resume it in its session, or end it: loop-hook cancel --session {id} --host {}", found.host.name()),
                ),
                LoopKind::Stale => Check::fail(
                    name,
                    format!(
                        "a {} loop of this project is active but no stop was judged for {} h: its session is probably gone",
                        found.host.name(),
                        found.idle_hours
                    ),
                    format!("loop-hook cancel --session {id} --host {}", found.host.name()),
                ),
                LoopKind::Unclaimed => Check::fail(
                    name,
                    format!(
                        "a {} loop of this project was never claimed by a conversation (idle {} h)",
                        found.host.name(),
                        found.idle_hours
                    ),
                    format!("loop-hook cancel --host {} in this directory, then start it again", found.host.name()),
                ),
            };
            check.minor()
        })
        .collect()
}

fn is_absolute(value: &str) -> bool {
    Path::new(value).is_absolute()
}

/// A path as one shell word.
fn shell_quote(path: &Path) -> String {
    shell_words::quote(&path.to_string_lossy()).into_owned()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::commands::doctor::facts::{EnvOverride, LoopFact};

    fn binary() -> BinaryFacts {
        BinaryFacts {
            this_version: "1.2.0".into(),
            this_path: Some(PathBuf::from("/opt/loop-hook")),
            cargo: Some(Binary {
                path: PathBuf::from("/h/.cargo/bin/loop-hook"),
                version: Some("1.2.0".into()),
            }),
            ..BinaryFacts::default()
        }
    }

    fn facts() -> Facts {
        Facts {
            project: PathBuf::from("/p"),
            binary: binary(),
            store: StoreFacts { root: Some(PathBuf::from("/h/.local/state/for-loop")), writable: Ok(()) },
            ..Facts::default()
        }
    }

    fn claude() -> ClaudeFacts {
        ClaudeFacts {
            config_dir: PathBuf::from("/h/.claude"),
            installed: vec!["for-loop@for-loop".into()],
            enabled: Some((PathBuf::from("/h/.claude/settings.json"), true)),
            ..ClaudeFacts::default()
        }
    }

    /// The one failing check named `name`, which must count.
    fn failing<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        let found = checks
            .iter()
            .find(|c| c.name == name && !c.ok)
            .unwrap_or_else(|| panic!("no failing {name}: {checks:#?}"));
        assert!(found.matters && !all_pass(checks), "{found:?}");
        found
    }

    #[test]
    fn where_output_ends_is_said_and_a_missing_namespace_is_minor() {
        use crate::checks::verify::Containment;
        let line = |containment| containment_line(containment);
        assert!(line(Containment::Namespace).ok);
        assert!(line(Containment::Namespace).detail.contains("pid-namespace"));
        let subreaper = line(Containment::Subreaper);
        assert!(!subreaper.matters, "{subreaper:?}");
        assert!(subreaper.detail.contains("subreaper"));
        assert_eq!(subreaper.ok, !cfg!(target_os = "linux"));
        let shown = lines(&Facts { containment: Some(Containment::Grace), ..facts() });
        assert!(
            shown.iter().any(|c| c.name == "output ends with its command" && c.detail.contains("200 ms"))
        );
        assert!(all_pass(&shown) == all_pass(&lines(&facts())));
    }

    #[test]
    fn a_healthy_claude_code_install_passes_every_check() {
        let checks = lines(&Facts { claude: Some(claude()), ..facts() });
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "claude-code: enabled" && c.ok));
    }

    #[test]
    fn a_missing_claude_code_plugin_is_fixed_from_a_clone_not_a_placeholder() {
        let none = ClaudeFacts { installed: Vec::new(), enabled: None, ..claude() };
        let checks = lines(&Facts { claude: Some(none), asked: Some(Host::ClaudeCode), ..facts() });
        let check = failing(&checks, "claude-code: installed");
        assert_eq!(
            check.fix.as_deref(),
            Some(
                "claude plugin marketplace add <a for-loop checkout> && claude plugin install for-loop@for-loop"
            )
        );
        assert!(checks.iter().filter_map(|c| c.fix.as_deref()).all(|fix| !fix.contains("OWNER/REPO")));
    }

    #[test]
    fn a_missing_claude_code_plugin_is_fixed_from_the_clone_cargo_installed_from() {
        let none = ClaudeFacts { installed: Vec::new(), enabled: None, ..claude() };
        for (dir, shown) in [("/src/for-loop", "/src/for-loop"), ("/src/it's here", "'/src/it'\\''s here'")] {
            let binary = BinaryFacts { cargo_checkout: Some(PathBuf::from(dir)), ..binary() };
            let checks = lines(&Facts {
                claude: Some(none.clone()),
                asked: Some(Host::ClaudeCode),
                binary,
                ..facts()
            });
            assert_eq!(
                failing(&checks, "claude-code: installed").fix,
                Some(format!(
                    "claude plugin marketplace add {shown} && claude plugin install for-loop@for-loop"
                ))
            );
        }
    }

    #[test]
    fn a_plugin_turned_off_in_settings_fails_with_the_enable_command() {
        let off = ClaudeFacts {
            enabled: Some((PathBuf::from("/p/.claude/settings.local.json"), false)),
            ..claude()
        };
        let checks = lines(&Facts { claude: Some(off), ..facts() });
        let check = failing(&checks, "claude-code: enabled");
        assert!(check.detail.contains("/p/.claude/settings.local.json"), "{check:?}");
        assert_eq!(check.fix.as_deref(), Some("claude plugin enable for-loop@for-loop"));
        let never = ClaudeFacts { enabled: None, ..claude() };
        failing(&lines(&Facts { claude: Some(never), ..facts() }), "claude-code: enabled");
    }

    #[test]
    fn disable_all_hooks_fails_naming_the_file() {
        let off =
            ClaudeFacts { hooks_disabled_by: vec![PathBuf::from("/h/.claude/settings.json")], ..claude() };
        let checks = lines(&Facts { claude: Some(off), ..facts() });
        let check = failing(&checks, "claude-code: hooks on");
        assert_eq!(
            check.fix.as_deref(),
            Some("remove \"disableAllHooks\": true from /h/.claude/settings.json")
        );
    }

    #[test]
    fn a_binary_or_store_set_from_project_settings_fails() {
        let over = EnvOverride {
            file: PathBuf::from("/p/.claude/settings.local.json"),
            in_project: true,
            name: "FOR_LOOP_BIN".into(),
            value: "/p/evil".into(),
            is_file: true,
        };
        let checks = lines(&Facts {
            claude: Some(ClaudeFacts { env_overrides: vec![over.clone()], ..claude() }),
            ..facts()
        });
        assert!(failing(&checks, "claude-code: settings env").detail.contains("the agent can write"));
        let user = EnvOverride { file: PathBuf::from("/h/.claude/settings.json"), in_project: false, ..over };
        let checks = lines(&Facts {
            claude: Some(ClaudeFacts { env_overrides: vec![user.clone()], ..claude() }),
            ..facts()
        });
        assert!(all_pass(&checks), "{checks:#?}");
        let missing = EnvOverride { is_file: false, ..user };
        let checks = lines(&Facts {
            claude: Some(ClaudeFacts { env_overrides: vec![missing], ..claude() }),
            ..facts()
        });
        failing(&checks, "claude-code: settings env");
    }

    #[test]
    fn opencode_needs_its_plugin_its_commands_and_a_binary() {
        let bare = OpencodeFacts { config: PathBuf::from("/h/.config/opencode"), ..OpencodeFacts::default() };
        let asked = lines(&Facts { opencode: Some(bare.clone()), asked: Some(Host::Opencode), ..facts() });
        let check = failing(&asked, "opencode: installed");
        // The folder as this platform joins it (and quotes it, where it holds a backslash).
        let plugins = shell_quote(&bare.config.join("plugins"));
        assert_eq!(
            check.fix,
            Some(format!(
                "mkdir -p {plugins} && cp <for-loop checkout>/plugin/opencode/plugins/* {plugins}/"
            ))
        );
        let plugin = Some(PathBuf::from("/h/.config/opencode/plugins/for-loop.js"));
        let partial =
            OpencodeFacts { plugin: plugin.clone(), missing_commands: vec!["resume-loop"], ..bare.clone() };
        let checks = lines(&Facts { opencode: Some(partial), ..facts() });
        let commands = failing(&checks, "opencode: commands");
        assert!(commands.detail.contains("/resume-loop"), "{commands:?}");
        let whole = OpencodeFacts { plugin, ..bare };
        let checks = lines(&Facts { opencode: Some(whole), ..facts() });
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "opencode: binary" && c.ok), "{checks:#?}");
    }

    #[test]
    fn an_untrusted_codex_hook_fails_with_the_trust_script_of_the_installed_plugin() {
        let codex = CodexFacts {
            home: PathBuf::from("/h/.codex"),
            plugin_root: Some(PathBuf::from("/h/.codex/plugins/cache/for-loop/for-loop/1.2.0")),
            stop_trusted: false,
            prompt_trusted: true,
            ..CodexFacts::default()
        };
        let checks = lines(&Facts { codex: Some(codex), ..facts() });
        let check = failing(&checks, "codex: Stop hook trusted");
        assert!(
            check
                .fix
                .as_deref()
                .unwrap()
                .starts_with("sh /h/.codex/plugins/cache/for-loop/for-loop/1.2.0/scripts/trust-hooks"),
            "{check:?}"
        );
    }

    #[test]
    fn an_untrusted_gemini_folder_fails_with_the_trusted_folders_entry() {
        let gemini = GeminiFacts {
            home: PathBuf::from("/h/.gemini"),
            extension: Some(PathBuf::from("/h/.gemini/extensions/for-loop")),
            trusted_folders_file: PathBuf::from("/h/.gemini/trustedFolders.json"),
            ..GeminiFacts::default()
        };
        let checks = lines(&Facts { gemini: Some(gemini.clone()), ..facts() });
        let check = failing(&checks, "gemini-cli: folder trusted");
        assert!(
            check
                .fix
                .as_deref()
                .unwrap()
                .contains("\"/p\": \"TRUST_FOLDER\" to /h/.gemini/trustedFolders.json")
        );
        let trusted = GeminiFacts { trust: FolderTrust::Trusted("env".into()), ..gemini };
        assert!(all_pass(&lines(&Facts { gemini: Some(trusted), ..facts() })));
    }

    #[test]
    fn copilot_repository_hooks_alone_fail_for_headless_runs_unless_allowed() {
        let copilot = CopilotFacts {
            home: PathBuf::from("/h/.copilot"),
            repo_hook: Some(HookFile { path: PathBuf::from("/p/.github/hooks/for-loop.json"), limit: None }),
            ..CopilotFacts::default()
        };
        let checks = lines(&Facts { copilot: Some(copilot.clone()), ..facts() });
        let check = failing(&checks, "copilot-cli: installed");
        assert!(check.detail.contains("--trust-folder or COPILOT_ALLOW_ALL=true"), "{check:?}");
        assert_eq!(
            check.fix.as_deref(),
            Some("mkdir -p /h/.copilot/hooks && cp /p/.github/hooks/for-loop.json /h/.copilot/hooks/")
        );
        assert!(all_pass(&lines(&Facts {
            copilot: Some(CopilotFacts { allow_all: true, ..copilot }),
            ..facts()
        })));
    }

    #[test]
    fn an_old_binary_first_on_path_fails() {
        let old = Binary { path: PathBuf::from("/usr/local/bin/loop-hook"), version: Some("0.9.0".into()) };
        let checks =
            lines(&Facts { binary: BinaryFacts { first_on_path: Some(old), ..binary() }, ..facts() });
        let check = failing(&checks, "binary on PATH");
        assert!(
            check.detail.contains("loop-hook 0.9.0 at /usr/local/bin/loop-hook comes first on PATH"),
            "{check:?}"
        );
        assert!(check.fix.as_deref().unwrap().contains("rm /usr/local/bin/loop-hook"));
    }

    #[test]
    fn a_store_that_cannot_be_written_fails_with_the_commands_that_make_it_writable() {
        let store =
            StoreFacts { root: Some(PathBuf::from("/h/state")), writable: Err("Permission denied".into()) };
        let checks = lines(&Facts { store, ..facts() });
        assert_eq!(
            failing(&checks, "store").fix.as_deref(),
            Some("mkdir -p /h/state && chmod u+rwx /h/state (or export FOR_LOOP_HOME=/a/writable/directory)")
        );
    }

    #[test]
    fn the_strict_tier_without_bubblewrap_fails_only_when_its_sandbox_is_asked_for() {
        let missing = TierFacts {
            bubblewrap: Some("bubblewrap (bwrap) is not installed".into()),
            ..TierFacts::default()
        };
        let checks = lines(&Facts { claude: Some(claude()), tier: missing.clone(), ..facts() });
        assert!(all_pass(&checks), "no sandbox asked for, so the default tier is fine: {checks:#?}");
        let asked = TierFacts { sandbox_settings: Ok(()), ..missing };
        let checks = lines(&Facts { claude: Some(claude()), tier: asked, ..facts() });
        assert!(failing(&checks, "claude-code: tier").fix.as_deref().unwrap().contains("bubblewrap"));
        let no_socat = TierFacts { sandbox_settings: Ok(()), socat: false, ..TierFacts::default() };
        failing(&lines(&Facts { claude: Some(claude()), tier: no_socat, ..facts() }), "claude-code: tier");
    }

    #[test]
    fn a_host_without_for_loop_counts_only_when_asked_for() {
        let bare = CodexFacts { home: PathBuf::from("/h/.codex"), ..CodexFacts::default() };
        let checks = lines(&Facts { codex: Some(bare.clone()), claude: Some(claude()), ..facts() });
        assert!(all_pass(&checks), "{checks:#?}");
        assert!(checks.iter().any(|c| c.name == "codex: installed" && !c.ok && !c.matters));
        failing(
            &lines(&Facts { codex: Some(bare), asked: Some(Host::Codex), ..facts() }),
            "codex: installed",
        );
    }

    #[test]
    fn with_no_host_and_no_plugin_the_first_line_says_so_and_what_to_install_first() {
        let checks = lines(&facts());
        let first = &checks[0];
        assert_eq!(first, failing(&checks, NOTHING_INSTALLED));
        assert!(first.detail.starts_with("no agent host is installed here"), "{first:?}");
        let fix = first.fix.as_deref().unwrap();
        assert!(fix.starts_with("install an agent host first"), "{fix}");
        assert!(fix.contains("claude plugin marketplace add <a for-loop checkout>"), "{fix}");
        let bare = CodexFacts { home: PathBuf::from("/h/.codex"), ..CodexFacts::default() };
        let checks = lines(&Facts { codex: Some(bare.clone()), hosts_found: vec![Host::Codex], ..facts() });
        let check = failing(&checks, NOTHING_INSTALLED);
        assert!(check.detail.contains("installed for none of the hosts here (codex)"), "{check:?}");
        assert!(check.fix.as_deref().unwrap().contains("`installed` line below"), "{check:?}");
        let asked = lines(&Facts { codex: Some(bare), asked: Some(Host::Codex), ..facts() });
        assert!(asked.iter().all(|c| c.name != NOTHING_INSTALLED), "--host's own line says it: {asked:#?}");
    }

    #[test]
    fn a_projects_disable_all_hooks_is_listed_before_the_plugin_is_installed() {
        let none = ClaudeFacts {
            installed: Vec::new(),
            enabled: None,
            hooks_disabled_by: vec![PathBuf::from("/p/.claude/settings.json")],
            ..claude()
        };
        let checks = lines(&Facts { claude: Some(none.clone()), ..facts() });
        let off = checks.iter().find(|c| c.name == "claude-code: hooks on").expect("listed");
        assert!(!off.ok && off.detail.contains("/p/.claude/settings.json sets disableAllHooks"), "{off:?}");
        let asked = lines(&Facts { claude: Some(none), asked: Some(Host::ClaudeCode), ..facts() });
        failing(&asked, "claude-code: hooks on");
    }

    #[test]
    fn parked_and_stale_loops_are_listed_without_failing_the_run() {
        let parked = LoopFact {
            session_id: "s1".into(),
            host: Host::ClaudeCode,
            kind: LoopKind::Parked,
            idle_hours: 3,
        };
        let checks = lines(&Facts { loops: vec![parked], claude: Some(claude()), ..facts() });
        let check = checks.iter().find(|c| c.name == "loop s1").unwrap();
        assert!(!check.ok && !check.matters && all_pass(&checks));
        assert!(check.fix.as_deref().unwrap().contains("loop-hook cancel --session s1"));
    }

    #[test]
    fn a_launcher_running_a_binary_of_another_version_fails() {
        let launch = Launch {
            root: PathBuf::from("/h/.claude/plugins/cache/for-loop/for-loop/1.3.0"),
            plugin_version: Some("1.3.0".into()),
            runs: Ok((
                Binary { path: PathBuf::from("/h/.cargo/bin/loop-hook"), version: Some("1.2.0".into()) },
                "cargo",
            )),
        };
        let checks =
            lines(&Facts { claude: Some(ClaudeFacts { launch: Some(launch), ..claude() }), ..facts() });
        let check = failing(&checks, "claude-code: binary");
        assert!(check.detail.contains("is 1.3.0 but runs loop-hook 1.2.0"), "{check:?}");
    }
}
