//! Best-of-K (`run --attempts K`): K independent loops on the same task, each in a git work tree
//! of its own under the store, started from a snapshot of the user's working tree. The first
//! attempt that verifies wins; `run --apply` applies its changes to the user's working tree.
//! Every attempt's end state is kept as a commit under `refs/for-loop/attempts/RUN/N`.
//!
//! The user's repository is only read, apart from those refs and git's record of each work tree
//! (`.git/worktrees/NAME`), removed with it. A work tree lives beside a lock file its driver
//! holds while it runs: a lock nobody holds marks an orphan of a driver that died, which the
//! next `run` removes, parking the orphan's loop.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use serde::{Deserialize, Serialize};
use serde_json::json;

mod applied_check;
mod fleet;
mod pick;
mod users_repo;
mod winner;

pub(in crate::run) use fleet::Ended;

pub(super) use super::RunOptions;
use super::driver::{Attempt, Driver, SharedLimit, park_loop};
use crate::state::ReasonCode;
use crate::state::Status;
use crate::store::Store;
use crate::support::Environment;
use crate::support::{Code, Outcome};
use crate::worktree::WorkTree;
use applied_check::AppliedCheck;
pub(super) use fleet::{DEFAULT_REMOTE, attempt, clean_head, misuse, remote_problem, run_id_problem};
pub(super) use pick::run as pick;
pub(super) use users_repo::RepoLook;
use winner::FirstVerified;

/// More attempts than this is a typo, not a plan.
pub(crate) use crate::commands::MAX_ATTEMPTS;
pub(super) const REFS: &str = "refs/for-loop/attempts";

/// A best-of-K run as kept in the store, for `--apply`.
#[derive(Debug, Serialize, Deserialize)]
struct Group {
    id: String,
    repo: PathBuf,
    base: String,
    winner: Option<u32>,
    attempts: Vec<AttemptRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AttemptRecord {
    n: u32,
    #[serde(rename = "loop")]
    loop_id: String,
    outcome: String,
    git_ref: Option<String>,
    /// What the attempt's driver said at its end (its receipt), for the summary.
    #[serde(skip)]
    said: String,
}

fn trees_dir(store: &Store) -> PathBuf {
    store.root().join("worktrees")
}

fn groups_dir(store: &Store) -> PathBuf {
    store.root().join("attempts")
}

/// A work tree of ours, removed (with git's record of it) when dropped.
pub(super) struct OwnedTree {
    pub(super) dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl OwnedTree {
    pub(super) fn add(store: &Store, repo: &WorkTree, base: &str, name: &str) -> Result<OwnedTree, String> {
        let trees = trees_dir(store);
        fs::create_dir_all(&trees).map_err(|e| format!("cannot create {}: {e}", trees.display()))?;
        let lock_path = trees.join(format!("{name}.lock"));
        // Locked before the tree exists: a tree without a held lock is an orphan to the sweep.
        let lock =
            File::create(&lock_path).map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
        lock.lock().map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
        let dir = trees.join(name);
        let tree = OwnedTree { dir: dir.clone(), lock_path, _lock: lock };
        // The user's checkout hooks are not ours to run: no git of `worktree` runs hooks.
        repo.add_linked_tree(&dir, base).map_err(|e| e.to_string())?;
        Ok(tree)
    }
}

impl Drop for OwnedTree {
    fn drop(&mut self) {
        remove_tree(&self.dir);
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// Removes a work tree of ours and git's record of it, and nothing else of the repository's
/// (`git worktree prune` would also drop the user's own records of trees on unmounted disks).
pub(super) fn remove_tree(dir: &Path) {
    // A linked work tree's `.git` file names its record, whose `gitdir` file names it back.
    let record = fs::read_to_string(dir.join(".git"))
        .ok()
        .and_then(|text| text.strip_prefix("gitdir:").map(|p| PathBuf::from(p.trim())))
        .filter(|record| {
            fs::read_to_string(record.join("gitdir"))
                .is_ok_and(|back| Path::new(back.trim()) == dir.join(".git"))
        });
    let _ = fs::remove_dir_all(dir);
    if let Some(record) = record {
        let _ = fs::remove_dir_all(record);
    }
}

/// Removes the work trees of drivers that died without cleaning up (their lock is free), and
/// parks their attempts' loops, which nothing drives any more.
pub(crate) fn sweep_orphans(env: &Environment) {
    let Ok(store) = Store::locate(env) else { return };
    let Ok(entries) = fs::read_dir(trees_dir(&store)) else { return };
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let lock_path = dir.with_extension("lock");
        let lock = File::open(&lock_path).ok();
        if lock.as_ref().is_some_and(|l| l.try_lock().is_err()) {
            continue;
        }
        remove_tree(&dir);
        let _ = fs::remove_file(&lock_path);
        let name = entry.file_name().to_string_lossy().into_owned();
        let paths = store.paths(&format!("attempt-{name}"));
        if paths.load().ok().flatten().is_some_and(|state| state.is_active()) {
            let _ = park_loop(
                &paths,
                ReasonCode::Interrupted,
                "its driver stopped without cleaning up; its work tree was swept by the next run",
            );
        }
    }
}

/// Runs the K attempts, one after another or at once, and says which one won.
pub(crate) fn run(env: &Environment, options: &RunOptions, k: u32) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --attempts: {what}"));
    sweep_orphans(env);
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return refuse(e.to_string()),
    };
    let user = WorkTree::open(&env.cwd);
    let start = match starting_point(env, &store, &user) {
        Ok(start) => start,
        Err(what) => return refuse(what),
    };
    // Attempts spread over machines share the id they are given (`--run-id`).
    let id = options.run_id.clone().unwrap_or_else(|| group_id(env));
    let before = RepoLook::take(&user);
    let _ = user.update_ref(&format!("{REFS}/{id}/base"), &start.base);
    let mut group =
        Group { id: id.clone(), repo: start.repo, base: start.base.clone(), winner: None, attempts: vec![] };
    save(&store, &group);

    let race = Race {
        env,
        options,
        store: &store,
        user: &user,
        id: &id,
        base: &start.base,
        prefix: &start.prefix,
        cancel: Arc::new(AtomicBool::new(false)),
        winner: Mutex::new(FirstVerified::default()),
        records: Mutex::new(vec![]),
    };
    race.run(k);
    (group.attempts, group.winner) = race.results();
    save(&store, &group);
    let changed = before.changes(&before.again(&user), &user);
    with_changes(summary(&group, options.json, k), &changed, options.json)
}

/// The summary, told what changed in the user's repository while the attempts ran: said
/// plainly, and the run fails, because a winner next to a changed check or hook is not to be
/// trusted blindly.
pub(super) fn with_changes(mut outcome: Outcome, changed: &[String], json: bool) -> Outcome {
    if changed.is_empty() {
        return outcome;
    }
    outcome.code = Code::Refused;
    if json {
        let event = json!({"event": "users_repo_changed", "changes": changed});
        outcome.stdout = format!("{event}\n{}", outcome.stdout);
        return outcome;
    }
    outcome.stdout.push_str(&format!(
        "\nfor-loop: your repository changed while the attempts ran, by you or by an attempt that \
         reached outside its work tree. Look at each before you commit or apply anything:\n  {}",
        changed.join("\n  ")
    ));
    outcome
}

/// What the attempts start from: the user's repository, a snapshot of the working tree, and
/// where in the repository the user is, for each attempt to run there too.
pub(super) struct Start {
    pub(super) repo: PathBuf,
    pub(super) base: String,
    pub(super) prefix: PathBuf,
}

/// Takes the snapshot the attempts start from, or says why they cannot start.
pub(super) fn starting_point(env: &Environment, store: &Store, user: &WorkTree) -> Result<Start, String> {
    if !user.is_git() {
        return Err(format!(
            "{} is not in a git repository; each attempt works in a git work tree of its own \
             (run `git init` there, or drop --attempts)",
            env.cwd.display()
        ));
    }
    let repo = user.root().to_path_buf();
    let store_root = fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().to_path_buf());
    if store_root.starts_with(&repo) {
        return Err(format!(
            "the loop store {} is inside the repository {}; the attempts' work trees must not be \
             (set FOR_LOOP_HOME elsewhere)",
            store.root().display(),
            repo.display()
        ));
    }
    let prefix = prefix_in(env, &repo);
    let base = user
        .snapshot(None, "for-loop: the working tree best-of-K attempts start from")
        .map_err(|e| format!("cannot snapshot the working tree: {e}"))?;
    Ok(Start { repo, base, prefix })
}

/// Where in the repository `repo` the user is, for each attempt (or a check of one) to run there too.
pub(super) fn prefix_in(env: &Environment, repo: &Path) -> PathBuf {
    fs::canonicalize(&env.cwd)
        .ok()
        .and_then(|cwd| cwd.strip_prefix(repo).ok().map(Path::to_path_buf))
        .unwrap_or_default()
}

/// The attempts of one run: what each needs to start, and what they share.
struct Race<'a> {
    env: &'a Environment,
    options: &'a RunOptions,
    store: &'a Store,
    user: &'a WorkTree,
    id: &'a str,
    base: &'a str,
    prefix: &'a Path,
    /// Raised when an attempt verifies: the others stop.
    cancel: Arc<AtomicBool>,
    winner: Mutex<FirstVerified>,
    records: Mutex<Vec<AttemptRecord>>,
}

impl Race<'_> {
    /// Runs attempts 1 to `k` (or only the one `--attempt` names), at once or one after another
    /// until one wins.
    fn run(&self, k: u32) {
        let numbers = self.options.attempt.map_or(1..=k, |n| n..=n);
        if self.options.parallel {
            thread::scope(|scope| {
                for n in numbers {
                    scope.spawn(move || self.attempt(n));
                }
            });
        } else {
            for n in numbers {
                self.attempt(n);
                if self.cancel.load(Ordering::SeqCst) || super::driver::interrupted() {
                    break;
                }
            }
        }
    }

    /// Runs attempt `n` in a work tree of its own, and records how it ended.
    fn attempt(&self, n: u32) {
        let loop_id = format!("attempt-{}-{n}", self.id);
        let record = match OwnedTree::add(self.store, self.user, self.base, &format!("{}-{n}", self.id)) {
            Err(e) => AttemptRecord {
                n,
                loop_id,
                outcome: format!("not started: {e}"),
                git_ref: None,
                said: String::new(),
            },
            Ok(tree) => self.drive(tree, n, loop_id),
        };
        self.records.lock().unwrap_or_else(PoisonError::into_inner).push(record);
    }

    /// Drives attempt `n`'s loop in `tree`, keeps its end state under the run's refs, then
    /// removes the tree.
    fn drive(&self, tree: OwnedTree, n: u32, loop_id: String) -> AttemptRecord {
        let attempt =
            Attempt { n, cancel: Arc::clone(&self.cancel), limit: SharedLimit::default(), kind: "attempt" };
        let ran = Driver::run_attempt(
            &self.env.with_cwd(tree.dir.join(self.prefix)),
            self.options,
            loop_id.clone(),
            attempt,
        );
        let state = self.store.paths(&loop_id).load().ok().flatten();
        let end = state.as_ref().and_then(|s| s.meta.outcome);
        if matches!(end, Some(ReasonCode::Verified | ReasonCode::Promise)) {
            self.claim_win(n);
        }
        let git_ref = self.keep_end_state(&tree, n);
        let outcome = self.outcome(end, state.map(|s| s.meta.status));
        drop(tree);
        AttemptRecord { n, loop_id, outcome, git_ref, said: ran.stdout }
    }

    /// The first attempt to verify wins, and tells the others to stop.
    fn claim_win(&self, n: u32) {
        let mut won = self.winner.lock().unwrap_or_else(PoisonError::into_inner);
        if won.judged(n, true) {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// Commits attempt `n`'s working tree under the run's refs; the ref, when that worked.
    fn keep_end_state(&self, tree: &OwnedTree, n: u32) -> Option<String> {
        WorkTree::open(&tree.dir).snapshot(Some(self.base), &format!("for-loop: attempt {n}")).ok().and_then(
            |commit| {
                let name = format!("{REFS}/{}/{n}", self.id);
                self.user.update_ref(&name, &commit).ok().map(|()| name)
            },
        )
    }

    /// How an attempt ended, for its record: its reason code, else what became of its loop.
    fn outcome(&self, end: Option<ReasonCode>, status: Option<Status>) -> String {
        match (end, status) {
            (Some(reason), _) => reason.as_str().to_string(),
            (None, Some(Status::Parked)) if self.cancel.load(Ordering::SeqCst) => {
                "parked: another attempt verified first".to_string()
            }
            (None, Some(status)) => format!("{status:?}").to_lowercase(),
            (None, None) => "not started".to_string(),
        }
    }

    /// Every attempt's record, in order, and the winner.
    fn results(self) -> (Vec<AttemptRecord>, Option<u32>) {
        let mut attempts = self.records.into_inner().unwrap_or_else(PoisonError::into_inner);
        attempts.sort_by_key(|a| a.n);
        (attempts, self.winner.into_inner().unwrap_or_else(PoisonError::into_inner).winner())
    }
}

/// Each attempt's own end (its receipt), then which attempt won, how to apply it, and the
/// refs every attempt is kept as; with `--json`, one last event saying the same.
fn summary(group: &Group, json: bool, k: u32) -> Outcome {
    let code = if group.winner.is_some() { Code::Success } else { Code::Refused };
    let apply = group.winner.map(|_| format!("loop-hook run --apply {}", group.id));
    if json {
        let event = json!({"event": "attempts", "run": group.id, "winner": group.winner,
            "base": group.base, "attempts": group.attempts, "apply": apply});
        return Outcome { code, stdout: event.to_string() };
    }
    let mut text = String::new();
    for a in group.attempts.iter().filter(|a| !a.said.trim().is_empty()) {
        text.push_str(&format!("attempt {}: {}\n\n", a.n, a.said.trim_end()));
    }
    text.push_str(&match (group.winner, apply) {
        (Some(n), Some(apply)) => format!(
            "for-loop: attempt {n} of {k} verified first (run {id}).\n  apply its changes: {apply}\n  \
             see them first: git diff {base} {REFS}/{id}/{n}",
            id = group.id,
            base = group.base
        ),
        _ => format!("for-loop: no attempt of {k} verified (run {}).", group.id),
    });
    for a in &group.attempts {
        let kept = a.git_ref.as_deref().unwrap_or("not kept: its work tree could not be read");
        text.push_str(&format!("\n  attempt {}: {}, kept as {kept}", a.n, a.outcome));
    }
    Outcome { code, stdout: text }
}

/// Applies the winner of the newest (or the named) best-of-K run to the working tree, with
/// `git apply` and no `--index`: the index, HEAD, branches and stash stay as they are.
pub(crate) fn apply(env: &Environment, wanted: &str) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --apply: {what}"));
    sweep_orphans(env);
    let store = match Store::locate(env) {
        Ok(store) => store,
        Err(e) => return refuse(e.to_string()),
    };
    let Some(group) = find_group(&store, wanted) else {
        return refuse(format!(
            "no best-of-K run{} to apply; start one with `loop-hook run TASK --verify CMD --attempts K`",
            if wanted.is_empty() { String::new() } else { format!(" named {wanted}") }
        ));
    };
    let Some(n) = group.winner else {
        return refuse(format!(
            "no attempt of run {} verified, so there is nothing to apply; its attempts are kept as \
             {REFS}/{}/N (see one with `git diff {} {REFS}/{}/N`)",
            group.id, group.id, group.base, group.id
        ));
    };
    let user = WorkTree::open(&env.cwd);
    if !user.is_git() || user.root() != group.repo {
        return refuse(format!("run {} was made in {}; run --apply there", group.id, group.repo.display()));
    }
    let winner = format!("{REFS}/{}/{n}", group.id);
    let diff = match user.binary_diff(&group.base, &winner) {
        Ok(diff) => diff,
        Err(e) => return refuse(format!("cannot read attempt {n}'s changes ({winner}): {e}")),
    };
    if diff.is_empty() {
        return Outcome::ok(format!(
            "for-loop: attempt {n} of run {} changed nothing; nothing to apply.",
            group.id
        ));
    }
    if let Err(why) = user.patch_applies(&diff) {
        if user.holds_patch(&diff) {
            return Outcome::ok(format!(
                "for-loop: attempt {n}'s changes of run {} are already in the working tree.",
                group.id
            ));
        }
        let why = why.to_string();
        return refuse(format!(
            "attempt {n}'s changes conflict with local changes in {}; nothing was changed. Commit or \
             stash yours, then run `loop-hook run --apply {}` again (see the attempt's with `git diff {} {winner}`).\n  {}",
            group.repo.display(),
            group.id,
            group.base,
            why.trim()
        ));
    }
    let check = match winners_check(env, &store, &group, n) {
        Ok(check) => check,
        Err(what) => return refuse(what),
    };
    apply_checked(&user, &group, n, &diff, &check)
}

/// The winner's check, read through custody, moved to the user's repository.
fn winners_check(env: &Environment, store: &Store, group: &Group, n: u32) -> Result<AppliedCheck, String> {
    let record = group.attempts.iter().find(|a| a.n == n).ok_or(format!("attempt {n} is not recorded"))?;
    let paths = store.paths(&record.loop_id);
    let state = match crate::store::Transaction::open(&paths, jiff::Timestamp::now()) {
        Ok((_, custody)) => super::driver::trusted(custody),
        Err(e) => Err(e.to_string()),
    }
    .map_err(|e| format!("attempt {n}'s loop cannot be read ({e}), so its change cannot be checked here"))?;
    let tree = trees_dir(store).join(format!("{}-{n}", group.id));
    let check = AppliedCheck::of(&state, &tree, &group.repo);
    // The attempt's code runs here as verify runs it: in a sandbox where one can be had.
    let read_only = crate::checks::sandbox::read_only_paths(env, store.root());
    Ok(check.sandboxed(crate::checks::sandbox::sandbox_unavailable().is_none(), read_only))
}

/// Applies `diff`, then runs the winner's verify in the user's working tree; when it fails
/// there, the change is taken back. A diff that changes the check itself is not applied.
fn apply_checked(user: &WorkTree, group: &Group, n: u32, diff: &[u8], check: &AppliedCheck) -> Outcome {
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --apply: {what}"));
    let winner = format!("{REFS}/{}/{n}", group.id);
    // Unreadable is never "nothing of the check changed": the change is not applied.
    let spec = format!("{winner}^{{commit}}");
    let changed = user.resolve(&spec).and_then(|id| user.changed_files(&group.base, &id));
    let changed = match changed {
        Ok(changed) => changed,
        Err(e) => {
            return refuse(format!(
                "the files attempt {n} changed could not be read ({e}); nothing was changed"
            ));
        }
    };
    let judges = check.judged_by_itself(&changed);
    if !judges.is_empty() {
        return refuse(format!(
            "attempt {n}'s changes include the check's own files ({}); nothing was changed. See them \
             with `git diff {} {winner}`",
            judges.join(", "),
            group.base
        ));
    }
    let stat = match user.apply_patch(diff) {
        Ok(stat) => stat,
        Err(e) => return refuse(format!("git apply failed: {e}")),
    };
    match check.run() {
        Ok(passed) => Outcome::ok(format!(
            "for-loop: applied attempt {n} of run {} to the working tree (nothing staged or committed); \
             {passed}:\n{stat}",
            group.id
        )),
        Err(failed) => {
            let undone = match user.take_back_patch(diff) {
                Ok(()) => "The change was taken back: your working tree is as it was.".to_string(),
                Err(e) => format!(
                    "Taking the change back failed ({e}): undo it with `git diff {} {winner} | git apply -R`.",
                    group.base
                ),
            };
            refuse(format!(
                "attempt {n} of run {} verified in its own work tree, but {failed}\n{undone} The attempt \
                 may depend on where it ran; see its change with `git diff {} {winner}`.",
                group.id, group.base
            ))
        }
    }
}

pub(super) fn group_id(env: &Environment) -> String {
    let token = crate::provenance::claim::new_token().unwrap_or_default();
    let random: String = token.chars().rev().take(8).collect();
    format!("{}-{random}", env.now.strftime("%Y%m%d-%H%M%S"))
}

fn save(store: &Store, group: &Group) {
    let dir = groups_dir(store);
    let _ = fs::create_dir_all(&dir);
    if let Ok(text) = serde_json::to_vec_pretty(group) {
        let _ = crate::store::write_atomic(&dir.join(format!("{}.json", group.id)), &text, true);
    }
}

/// The id of the newest best-of-K run of the store, if any.
pub(super) fn newest_group_id(store: &Store) -> Option<String> {
    find_group(store, "").map(|group| group.id)
}

/// The newest run, or the one whose id (or one of whose attempts' loop ids) is `wanted`.
fn find_group(store: &Store, wanted: &str) -> Option<Group> {
    let mut groups: Vec<Group> = fs::read_dir(groups_dir(store))
        .ok()?
        .flatten()
        .filter_map(|e| serde_json::from_slice(&fs::read(e.path()).ok()?).ok())
        .filter(|g: &Group| {
            wanted.is_empty() || g.id == wanted || g.attempts.iter().any(|a| a.loop_id == wanted)
        })
        .collect();
    groups.sort_by(|a, b| a.id.cmp(&b.id));
    groups.pop()
}
