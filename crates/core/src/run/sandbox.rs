//! The sandbox `loop-hook run` starts each agent run in: bubblewrap, with the project (or the
//! attempt's work tree) writable and what judges the loop read-only, in a PID namespace that
//! dies with the run.
//!
//! The driver, verify and the judge stay outside it. Inside, the agent can write its project,
//! `/tmp`, its progress notes and a private copy of its CLI's own settings; the loop store,
//! for-loop's binary and plugin, git's hooks and config, the host's project settings and the
//! rest of the machine are read-only. For an attempt of `--attempts K`, the user's repository is
//! read-only as a whole: the attempt writes its work tree and git's record of it, no more.
//! A task of a backlog runs in the same box: the store (where the other tasks' work trees and
//! the merge queue's lie) and the user's repository (where the integration branch and the
//! task branches live) are read-only to it.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::checks::{Bwrap, Tier, sandbox};
use crate::worktree::WorkTree;

/// What the command line asked of the agent's sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SandboxAsked {
    /// Sandboxed where the machine allows it.
    #[default]
    Default,
    /// `--no-sandbox`.
    Off,
    /// `--require-strict`.
    Required,
}

/// Whether the agent runs sandboxed, and why not when it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunTier {
    Sandboxed,
    /// bubblewrap cannot start here; the run goes on in the default tier.
    Unavailable(String),
    /// `--no-sandbox`.
    Off,
}

impl RunTier {
    /// The tier a run asked for gets: `Err` when `--require-strict` cannot be met.
    pub(crate) fn choose(asked: SandboxAsked) -> Result<RunTier, String> {
        if asked == SandboxAsked::Off {
            return Ok(RunTier::Off);
        }
        match sandbox::sandbox_unavailable() {
            None => Ok(RunTier::Sandboxed),
            Some(why) if asked == SandboxAsked::Required => Err(format!(
                "--require-strict: the agent cannot be sandboxed here ({why}); nothing was started"
            )),
            Some(why) => Ok(RunTier::Unavailable(why)),
        }
    }

    pub(crate) fn is_sandboxed(&self) -> bool {
        *self == RunTier::Sandboxed
    }

    /// The loop's tier as `start` records it and `status` and the report show it: strict when
    /// the agent is sandboxed (verify then is too), with why in the run's words.
    pub(crate) fn loop_tier(&self) -> Tier {
        let why = match self {
            RunTier::Sandboxed => "'s sandbox (bubblewrap): the agent writes only its project (or attempt \
                                   work tree) and /tmp, verify sandboxed"
                .to_string(),
            RunTier::Unavailable(why) => format!(" could not sandbox the agent: {why}"),
            RunTier::Off => " --no-sandbox".to_string(),
        };
        Tier::of_run(self.is_sandboxed(), &why)
    }

    /// One line for the run's first output, its events and its receipt.
    pub(crate) fn line(&self) -> String {
        const DEFAULT: &str = "the default tier: tampering is detected and reported, not prevented";
        match self {
            RunTier::Sandboxed => "sandbox: bubblewrap — the agent writes only its project (or attempt work \
                                   tree) and /tmp; the loop store, for-loop, the host's settings and git's \
                                   hooks and config are read-only, and nothing it starts outlives its run"
                .to_string(),
            RunTier::Unavailable(why) => {
                format!("sandbox: none — {why}; running in {DEFAULT} (--require-strict refuses instead)")
            }
            RunTier::Off => format!("sandbox: off (--no-sandbox) — {DEFAULT}"),
        }
    }
}

/// Where one agent run may write, and what stays read-only around it.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentBox {
    /// Where the agent starts.
    pub(crate) cwd: PathBuf,
    /// The project's top level, or the attempt's work tree: writable.
    pub(crate) work: PathBuf,
    /// Git's directories for `work` (its own and the common one) when it is in git.
    pub(crate) git: Option<GitDirs>,
    /// For an attempt: the user's repository, read-only as a whole.
    pub(crate) users_repo: Option<PathBuf>,
    /// The loop store, for-loop's binary and plugin: read-only.
    pub(crate) read_only: Vec<PathBuf>,
    /// The progress notes the agent is asked to keep: writable, alone in the store.
    pub(crate) notes: PathBuf,
    /// The agent CLI's own settings, each `(private copy, where the CLI looks)`.
    pub(crate) config: Vec<(PathBuf, PathBuf)>,
}

/// A work tree's git directory and the common one (the same outside linked work trees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitDirs {
    pub(crate) own: PathBuf,
    pub(crate) common: PathBuf,
}

impl GitDirs {
    /// The git directories of the work tree at `work`, or `None` outside git.
    pub(crate) fn of(work: &Path) -> Option<GitDirs> {
        let tree = WorkTree::open(work);
        if !tree.is_git() {
            return None;
        }
        let (own, common) = tree.git_dirs().ok()?;
        let common = fs::canonicalize(&common).unwrap_or(common);
        Some(GitDirs { own, common })
    }
}

impl AgentBox {
    /// bubblewrap's arguments up to `--`, the agent's command to follow. Mounts are in order,
    /// each covering the ones before it: what must stay read-only inside a writable directory
    /// comes after that directory.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mut bwrap = Bwrap::new();
        bwrap.as_pid_1();
        if Path::new("/tmp").is_dir() {
            bwrap.bind(Path::new("/tmp"));
        }
        bwrap.bind(&self.work);
        if let Some(git) = &self.git.as_ref().filter(|_| self.users_repo.is_none()) {
            // The project's own repository: the agent may commit, but not plant hooks or config.
            bwrap.bind(&git.own).bind(&git.common);
        }
        for path in self.read_only.iter().chain(&self.users_repo) {
            bwrap.read_only(path);
        }
        if self.users_repo.is_some() {
            // The work tree lies in the store, git's record of it in the user's repository.
            bwrap.bind(&self.work);
            if let Some(git) = &self.git {
                bwrap.bind(&git.own);
            }
        }
        for path in self.guarded() {
            bwrap.read_only(&path);
        }
        for (copy, original) in &self.config {
            bwrap.bind_to(copy, original);
        }
        if self.notes.is_file() {
            bwrap.bind(&self.notes);
        }
        bwrap.finish(&self.cwd)
    }

    /// What stays read-only inside the writable directories: git's hooks and config, the
    /// files that lead git elsewhere (a linked work tree's `.git` file, its record's
    /// `commondir` and `gitdir`: the driver's own git reads them after the run), and the hosts'
    /// project settings.
    fn guarded(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> =
            Some(self.work.join(".git")).filter(|git| git.is_file()).into_iter().collect();
        if let Some(git) = &self.git {
            paths.extend(git_guarded(&git.common));
            paths.extend(["commondir", "gitdir", "config.worktree"].map(|name| git.own.join(name)));
            // Submodules' repositories: the driver's git reads their config too.
            let modules = fs::read_dir(git.common.join("modules")).into_iter().flatten().flatten();
            paths.extend(modules.flat_map(|module| git_guarded(&module.path())));
        }
        paths.extend([".claude", ".gemini", ".codex"].map(|name| self.work.join(name)));
        paths
    }
}

/// What of a git directory can make git run a program or read other rules: its hooks, its
/// config and `info/` (attributes, excludes).
fn git_guarded(dir: &Path) -> [PathBuf; 3] {
    ["hooks", "config", "info"].map(|name| dir.join(name))
}

/// Names under an agent CLI's settings directory that hold its history, caches and logs: left
/// out of the private copy, the CLI starts them afresh.
const HISTORY: [&str; 14] = [
    "projects",
    "todos",
    "shell-snapshots",
    "statsig",
    "debug",
    "file-history",
    "sessions",
    "archived_sessions",
    "log",
    "logs",
    "tmp",
    "history",
    "cache",
    "history.jsonl",
];
/// A file larger than this in a settings directory is history, not settings.
const LARGEST_SETTING: u64 = 8 << 20;

/// Copies each of `originals` that exists into `into` (a private directory removed after the
/// run): the pairs `(copy, original)` to bind, so the CLI writes its session and settings where
/// they are thrown away, and the user's own stay as they were.
pub(crate) fn private_copies(originals: &[PathBuf], into: &Path) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut pairs = Vec::new();
    for (n, original) in originals.iter().enumerate() {
        let Ok(meta) = fs::metadata(original) else { continue };
        let copy = into.join(format!("{n}"));
        if meta.is_dir() {
            copy_dir(original, &copy, 0)?;
        } else {
            fs::copy(original, &copy)?;
        }
        pairs.push((copy, original.clone()));
    }
    Ok(pairs)
}

fn copy_dir(from: &Path, to: &Path, depth: u32) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)?.flatten() {
        let name = entry.file_name();
        if depth == 0 && HISTORY.iter().any(|h| name == *h) {
            continue;
        }
        let (source, dest) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(fs::read_link(&source)?, &dest)?;
        } else if kind.is_dir() && depth < 8 {
            copy_dir(&source, &dest, depth + 1)?;
        } else if kind.is_file() && entry.metadata().is_ok_and(|m| m.len() <= LARGEST_SETTING) {
            fs::copy(&source, &dest)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(args: &[OsString]) -> String {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }

    /// The position of `needle` in `haystack`, failing the test when absent.
    fn at(haystack: &str, needle: &str) -> usize {
        haystack.find(needle).unwrap_or_else(|| panic!("no {needle:?} in {haystack}"))
    }

    fn project() -> (tempfile::TempDir, AgentBox) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let work = root.join("p");
        for sub in ["p/.git/hooks", "p/.git/modules/lib/hooks", "p/.claude", "store/sessions/s"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("p/.git/config"), "").unwrap();
        fs::write(root.join("store/sessions/s/progress.md"), "").unwrap();
        let agent = AgentBox {
            cwd: work.clone(),
            work: work.clone(),
            git: Some(GitDirs { own: work.join(".git"), common: work.join(".git") }),
            users_repo: None,
            read_only: vec![root.join("store"), root.join("nonexistent-bin")],
            notes: root.join("store/sessions/s/progress.md"),
            config: vec![(root.join("copy/0"), root.join("home/.claude"))],
        };
        (dir, agent)
    }

    #[test]
    fn the_project_is_writable_and_the_store_hooks_and_settings_are_not() {
        let (dir, agent) = project();
        let root = dir.path().display().to_string();
        let args = text(&agent.args());
        assert!(args.starts_with("bwrap --ro-bind / / --dev /dev --proc /proc"), "{args}");
        assert!(
            args.ends_with(&format!("--unshare-pid --die-with-parent --new-session --chdir {root}/p --"))
        );
        let project = at(&args, &format!("--bind {root}/p {root}/p"));
        let store = at(&args, &format!("--ro-bind {root}/store {root}/store"));
        for guarded in ["p/.git/hooks", "p/.git/config", "p/.git/modules/lib/hooks", "p/.claude"] {
            let ro = at(&args, &format!("--ro-bind {root}/{guarded} {root}/{guarded}"));
            assert!(ro > project, "{guarded} is bound before the project, which would uncover it: {args}");
        }
        let notes = at(&args, &format!("--bind {root}/store/sessions/s/progress.md"));
        assert!(store < project || notes > store, "{args}");
        assert!(notes > store, "the notes must be bound after the store that covers them: {args}");
        assert!(args.contains(&format!("--bind {root}/copy/0 {root}/home/.claude")), "{args}");
        assert!(!args.contains("nonexistent-bin"), "a missing path is not bound: {args}");
    }

    #[test]
    fn an_attempt_writes_its_work_tree_and_record_but_not_the_users_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (repo, store) = (root.join("repo"), root.join("store"));
        let work = store.join("worktrees/r-1");
        let record = repo.join(".git/worktrees/r-1");
        for sub in [&repo.join(".git/hooks"), &record, &work] {
            fs::create_dir_all(sub).unwrap();
        }
        for file in
            [work.join(".git"), record.join("commondir"), record.join("gitdir"), repo.join(".git/config")]
        {
            fs::write(file, "").unwrap();
        }
        let agent = AgentBox {
            cwd: work.clone(),
            work: work.clone(),
            git: Some(GitDirs { own: record.clone(), common: repo.join(".git") }),
            users_repo: Some(repo.clone()),
            read_only: vec![store.clone()],
            ..AgentBox::default()
        };
        let args = text(&agent.args());
        let d = |p: &Path| p.display().to_string();
        let users = at(&args, &format!("--ro-bind {} {}", d(&repo), d(&repo)));
        let store_ro = at(&args, &format!("--ro-bind {} {}", d(&store), d(&store)));
        let work_rw = args.rfind(&format!("--bind {} {}", d(&work), d(&work))).unwrap();
        let record_rw = at(&args, &format!("--bind {} {}", d(&record), d(&record)));
        assert!(work_rw > store_ro && record_rw > users, "{args}");
        assert!(
            !args.contains(&format!("--bind {} ", d(&repo.join(".git")))),
            "the common dir is writable: {args}"
        );
        for guarded in
            [work.join(".git"), record.join("commondir"), record.join("gitdir"), repo.join(".git/hooks")]
        {
            let ro = at(&args, &format!("--ro-bind {} {}", d(&guarded), d(&guarded)));
            assert!(ro > work_rw && ro > record_rw, "{} not guarded: {args}", guarded.display());
        }
    }

    #[test]
    fn private_copies_leave_history_and_large_files_out_and_skip_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude");
        fs::create_dir_all(config.join("projects/x")).unwrap();
        fs::create_dir_all(config.join("plugins/p")).unwrap();
        fs::write(config.join("settings.json"), "{}").unwrap();
        fs::write(config.join("plugins/p/a"), "a").unwrap();
        fs::write(config.join("projects/x/t.jsonl"), "t").unwrap();
        fs::write(config.join("big"), vec![0u8; usize::try_from(LARGEST_SETTING).unwrap() + 1]).unwrap();
        let file = dir.path().join(".claude.json");
        fs::write(&file, "{}").unwrap();
        let into = dir.path().join("copy");
        let pairs =
            private_copies(&[config.clone(), dir.path().join("missing"), file.clone()], &into).unwrap();
        assert_eq!(pairs.len(), 2, "{pairs:?}");
        let (copy, original) = &pairs[0];
        assert_eq!(original, &config);
        assert!(copy.join("settings.json").is_file() && copy.join("plugins/p/a").is_file());
        assert!(!copy.join("projects").exists() && !copy.join("big").exists());
        assert_eq!(fs::read_to_string(&pairs[1].0).unwrap(), "{}");
        assert_eq!(pairs[1].1, file);
    }

    #[test]
    fn each_tier_says_what_it_is() {
        assert_eq!(RunTier::choose(SandboxAsked::Off), Ok(RunTier::Off));
        assert!(RunTier::Off.line().starts_with("sandbox: off (--no-sandbox)"));
        let none = RunTier::Unavailable("bwrap is not installed".into()).line();
        assert!(
            none.starts_with("sandbox: none — bwrap is not installed; running in the default tier"),
            "{none}"
        );
    }

    /// A backlog's layout, run in bubblewrap: an agent in task 1's work tree writes its own tree,
    /// but neither task 2's work tree, nor the queue's, nor any ref of the repository (the
    /// integration branch and the task branches live there).
    #[test]
    fn a_backlog_task_cannot_write_another_tasks_tree_or_the_repositorys_refs() {
        use crate::worktree::testing::{git, repo, try_git};
        let dir = repo(&[("a.txt", "one\n")]);
        let store = tempfile::tempdir().unwrap();
        let user = WorkTree::open(dir.path());
        let head = user.head_commit().unwrap();
        user.update_ref("refs/for-loop/backlog/r/integration", &head).unwrap();
        let trees = store.path().join("backlog/r/tasks");
        fs::create_dir_all(&trees).unwrap();
        for name in ["1", "2", "../queue"] {
            user.add_linked_tree(&trees.join(name), &head).unwrap();
        }
        let own = trees.join("1");
        let git_dirs = GitDirs::of(&own).unwrap();
        let agent = AgentBox {
            cwd: own.clone(),
            work: own.clone(),
            users_repo: git_dirs.common.parent().map(Path::to_path_buf),
            git: Some(git_dirs),
            read_only: vec![store.path().to_path_buf()],
            ..AgentBox::default()
        };
        let attack = format!(
            "echo mine > a.txt; echo theirs > {other}/a.txt; echo queue > {queue}/a.txt; \
             git update-ref refs/for-loop/backlog/r/integration HEAD~0 2>/dev/null; \
             echo x > {repo}/.git/refs/for-loop/backlog/r/integration; \
             git branch planted 2>/dev/null; true",
            other = trees.join("2").display(),
            queue = store.path().join("backlog/r/queue").display(),
            repo = dir.path().display(),
        );
        let args = agent.args();
        let status = std::process::Command::new(&args[0])
            .args(&args[1..])
            .args(["sh", "-c", &attack])
            .status()
            .unwrap();
        assert!(status.success(), "bubblewrap did not run the agent");
        assert_eq!(fs::read_to_string(own.join("a.txt")).unwrap(), "mine\n", "its own tree must be writable");
        assert_eq!(
            fs::read_to_string(trees.join("2/a.txt")).unwrap(),
            "one\n",
            "another task's tree was written"
        );
        assert_eq!(fs::read_to_string(store.path().join("backlog/r/queue/a.txt")).unwrap(), "one\n");
        assert_eq!(
            user.resolve("refs/for-loop/backlog/r/integration").unwrap(),
            head,
            "the integration ref moved"
        );
        assert!(
            !try_git(dir.path(), &["rev-parse", "--verify", "-q", "refs/heads/planted"]).status.success()
        );
        assert!(git(dir.path(), &["status", "--porcelain"]).is_empty());
    }
}
