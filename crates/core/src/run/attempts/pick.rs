//! `loop-hook run --pick ID --verify CMD`: picks the winner of a best-of-K run whose attempts ran
//! on other machines and pushed their end states ([`crate::run::attempts::fleet`]).
//!
//! Nothing an attempt says is trusted. Each pushed attempt is checked out fresh, in a work tree
//! of its own, and judged here: it must be a commit on top of the commit this checkout is at
//! (the one the run started from), leave the check's files as they are there (the oracle, as a
//! loop captures it at start), and pass verify, run here. The winner is then picked by the rule
//! best-of-K uses on one machine ([`crate::run::attempts::winner`]). An attempt that was never pushed (its job
//! was killed) is reported, not fatal.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::json;

use crate::checks::Oracle;
use crate::checks::VerifySpec;
use crate::commands::LoopRequest;
use crate::run::RunOptions;
use crate::run::attempts::fleet::{Claim, DEFAULT_REMOTE};
use crate::run::attempts::winner::FirstVerified;
use crate::run::attempts::{OwnedTree, REFS, prefix_in};
use crate::run::sandbox::GitDirs;
use crate::store::Store;
use crate::support::Environment;
use crate::support::text::nearest::nearest;
use crate::support::{Code, Outcome};
use crate::worktree::WorkTree;

/// A commit message longer than this holds no claim worth reading.
const MAX_MESSAGE_BYTES: u64 = 64 << 10;
/// Other runs on the remote named when the one asked for is not there.
const NAMED_RUNS: usize = 5;

/// How one attempt fared here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    /// Its files pass verify here, the check untouched.
    Verified,
    /// An honest attempt that did not get there.
    NotVerified,
    /// Not judged, or its claim is false: not a commit, not from the run's start, the check
    /// changed, or verify fails where it claims it passed.
    Refused,
    /// Nothing was pushed for it.
    Missing,
    /// A ref under the run that names no attempt from 1 to K.
    Ignored,
}

/// One attempt's line in the table.
#[derive(Debug, Serialize)]
struct Row {
    attempt: u32,
    verdict: Verdict,
    detail: String,
    #[serde(rename = "ref")]
    git_ref: String,
    commit: Option<String>,
    claim: Option<Claim>,
}

/// What every attempt is judged against.
struct Judge<'a> {
    user: &'a WorkTree,
    store: &'a Store,
    id: &'a str,
    base: String,
    base_tree: String,
    oracle: Oracle,
    verify: VerifySpec,
    prefix: std::path::PathBuf,
    /// What stays read-only while an attempt's code runs under verify (the store, for-loop's
    /// files, this repository and its git directory), or `None` where bubblewrap cannot start.
    sandbox: Option<Vec<std::path::PathBuf>>,
}

/// Re-checks the pushed attempts of run `--pick ID` and names the winner.
pub(crate) fn run(env: &Environment, options: &RunOptions) -> Outcome {
    let id = options.pick.as_deref().unwrap_or_default();
    let remote = options.remote.as_deref().unwrap_or(DEFAULT_REMOTE);
    let refuse = |what: String| Outcome::refused(format!("for-loop: run --pick {id}: {what}"));
    let request = match LoopRequest::checks_only(&options.loop_flags) {
        Ok(request) if request.metric.is_none() => request,
        Ok(_) => return refuse("a metric run has no verify to re-run; --pick judges by --verify".into()),
        Err(e) => return refuse(e.to_string()),
    };
    let Some(verify) = request.verify.clone() else {
        return refuse(
            "give --verify CMD, the check re-run on each attempt (what an attempt claims is not trusted)"
                .into(),
        );
    };
    let user = WorkTree::open(&env.cwd);
    let store = match Store::locate(env) {
        Ok(store) if user.is_git() => store,
        Ok(_) => return refuse(format!("{} is not in a git repository", env.cwd.display())),
        Err(e) => return refuse(e.to_string()),
    };
    let pushed = match fetch(&user, remote, id) {
        Ok(pushed) => pushed,
        Err(what) => return refuse(what),
    };
    let judge = match Judge::new(env, &user, &store, id, (&verify, &request)) {
        Ok(judge) => judge,
        Err(what) => return refuse(what),
    };
    let k = options.attempts.or_else(|| judge.claimed_count(&pushed)).unwrap_or(0);
    let mut rows: Vec<Row> = (1..=k).map(|n| judge.check(n, pushed.contains(&n.to_string()))).collect();
    rows.extend(pushed.iter().filter(|name| !(1..=k).any(|n| n.to_string() == **name)).map(|name| Row {
        attempt: 0,
        verdict: Verdict::Ignored,
        detail: format!("ignored: not attempt 1 to {k} of the run"),
        git_ref: format!("{REFS}/{id}/{name}"),
        commit: None,
        claim: None,
    }));
    let mut rule = FirstVerified::default();
    for row in rows.iter().filter(|row| row.attempt > 0) {
        rule.judged(row.attempt, row.verdict == Verdict::Verified);
    }
    report(&judge, remote, &verify, &rows, rule.winner(), options.json)
}

/// Fetches the run's attempt refs from `remote`; their names after `REFS/ID/`. None there: the
/// run id is unknown, and the runs the remote has are named.
fn fetch(user: &WorkTree, remote: &str, id: &str) -> Result<BTreeSet<String>, String> {
    let listed = user
        .remote_refs(remote, &format!("{REFS}/*"))
        .map_err(|e| format!("cannot list the attempts on the remote {remote:?}: {e}"))?;
    let refs: Vec<&str> =
        listed.iter().filter_map(|(_, name)| name.strip_prefix(REFS)?.strip_prefix('/')).collect();
    let prefix = format!("{id}/");
    let mine: BTreeSet<String> =
        refs.iter().filter_map(|name| Some(name.strip_prefix(&prefix)?.to_string())).collect();
    if mine.is_empty() {
        let mut runs: Vec<&str> =
            refs.iter().filter_map(|name| name.split_once('/')).map(|(run, _)| run).collect();
        runs.dedup();
        let hint = match nearest(id, runs.iter().copied()) {
            Some(near) => format!(": did you mean {near}?"),
            None if runs.is_empty() => " (it has none)".to_string(),
            None => format!(
                "; it has runs {}",
                runs.iter().rev().take(NAMED_RUNS).copied().collect::<Vec<_>>().join(", ")
            ),
        };
        return Err(format!("no attempts of run {id} on the remote {remote:?}{hint}"));
    }
    let spec = format!("+{REFS}/{id}/*:{REFS}/{id}/*");
    user.fetch_refs(remote, &spec)
        .map_err(|e| format!("cannot fetch the attempts of run {id} from {remote:?}: {e}"))?;
    Ok(mine)
}

impl<'a> Judge<'a> {
    /// The start every attempt must be on (this checkout's HEAD), and the check as it is there.
    fn new(
        env: &Environment,
        user: &'a WorkTree,
        store: &'a Store,
        id: &'a str,
        (verify, request): (&str, &LoopRequest),
    ) -> Result<Judge<'a>, String> {
        let base = user.head_commit().map_err(|_| {
            "this checkout has no commit: check out the commit the run started from".to_string()
        })?;
        let base_tree = user.resolve(&format!("{base}^{{tree}}")).map_err(|e| e.to_string())?;
        let prefix = prefix_in(env, user.root());
        let tree = OwnedTree::add(store, user, &base, &format!("pick-{id}-base"))?;
        let oracle = Oracle::capture_commands(
            &tree.dir.join(&prefix),
            &[verify],
            &request.protect,
            !request.allow_test_edits,
        );
        let verify = VerifySpec {
            command: verify.to_string(),
            cwd: std::path::PathBuf::new(),
            timeout: std::time::Duration::from_secs(request.verify_timeout_secs),
            sandbox: vec![],
        };
        let sandbox = crate::checks::sandbox::sandbox_unavailable().is_none().then(|| {
            let mut read_only = crate::checks::sandbox::read_only_paths(env, store.root());
            read_only.push(user.root().to_path_buf());
            read_only.extend(GitDirs::of(user.root()).into_iter().flat_map(|git| [git.own, git.common]));
            read_only
        });
        Ok(Judge { user, store, id, base, base_tree, oracle, verify, prefix, sandbox })
    }

    /// How verify runs in the attempt's checkout at `cwd`: in verify's sandbox where bubblewrap
    /// works, so the attempt's code cannot rewrite the check, this repository, its git hooks or
    /// config, or the store while it is judged.
    fn verify_in(&self, cwd: std::path::PathBuf) -> VerifySpec {
        let sandbox = self.sandbox.as_ref().map(|read_only| {
            let oracle = self.oracle.files.keys().map(|file| cwd.join(file));
            crate::checks::sandbox::verify_sandbox(
                &cwd,
                &read_only.iter().cloned().chain(oracle).collect::<Vec<_>>(),
            )
        });
        VerifySpec { cwd, sandbox: sandbox.unwrap_or_default(), ..self.verify.clone() }
    }

    /// K as the attempts claim it, for a pick not told: only which attempts to report missing.
    /// Only refs named 1 to the most a run may have are read, however many the remote has.
    fn claimed_count(&self, pushed: &BTreeSet<String>) -> Option<u32> {
        let most = crate::run::attempts::MAX_ATTEMPTS;
        let numbered: Vec<u32> = pushed
            .iter()
            .filter_map(|name| name.parse::<u32>().ok())
            .filter(|n| (1..=most).contains(n))
            .collect();
        let claimed = numbered.iter().filter_map(|n| self.claim(&format!("{REFS}/{}/{n}", self.id)));
        let claimed: Vec<u32> = claimed.map(|claim| claim.attempts).filter(|k| *k <= most).collect();
        numbered.into_iter().chain(claimed).max()
    }

    /// The claim in the message of the commit `name` names, if it is one and holds one.
    fn claim(&self, name: &str) -> Option<Claim> {
        let commit = self.user.resolve(&format!("{name}^{{commit}}")).ok()?;
        let text = self.user.commit_text(&commit, MAX_MESSAGE_BYTES).ok()??;
        Claim::read(&String::from_utf8_lossy(&text))
    }

    /// Attempt `n`'s row: missing, refused, or what verify says of it here.
    fn check(&self, n: u32, pushed: bool) -> Row {
        let git_ref = format!("{REFS}/{}/{n}", self.id);
        let mut row = Row {
            attempt: n,
            verdict: Verdict::Missing,
            detail: String::new(),
            git_ref,
            commit: None,
            claim: None,
        };
        if !pushed {
            row.detail = "missing: nothing was pushed (its job was killed, or failed before its end)".into();
            return row;
        }
        row.claim = self.claim(&row.git_ref);
        row.verdict = Verdict::Refused;
        match self.judge(&row.git_ref) {
            Ok((commit, passed, said)) => {
                row.commit = Some(commit);
                let claimed = row.claim.as_ref().is_some_and(|c| c.verified);
                (row.verdict, row.detail) = match (passed, claimed) {
                    (true, _) => (Verdict::Verified, said),
                    (false, true) => (Verdict::Refused, format!("refused: it claims verified, but {said}")),
                    (false, false) => (Verdict::NotVerified, said),
                };
            }
            Err((commit, what)) => (row.commit, row.detail) = (commit, format!("refused: {what}")),
        }
        row
    }

    /// Checks out the attempt `name` fresh and judges it: its commit, whether it passed, and
    /// what verify said; or why it cannot be judged.
    fn judge(&self, name: &str) -> Result<(String, bool, String), (Option<String>, String)> {
        let Ok(commit) = self.user.resolve(&format!("{name}^{{commit}}")) else {
            let kind = self.user.object_kind(name).unwrap_or_else(|_| "unreadable".into());
            return Err((None, format!("{name} is not a commit (it is a {kind})")));
        };
        let refused = |what: String| Err((Some(commit.clone()), what));
        let parent = self.user.resolve(&format!("{commit}^1^{{tree}}")).ok();
        if parent.as_deref() != Some(self.base_tree.as_str()) {
            return refused(format!(
                "it does not start from this checkout's commit {} (run the pick on the commit the attempts started from)",
                self.base
            ));
        }
        let tree = match OwnedTree::add(
            self.store,
            self.user,
            &commit,
            &format!("pick-{}-{}", self.id, name_tail(name)),
        ) {
            Ok(tree) => tree,
            Err(e) => return refused(format!("cannot check it out: {e}")),
        };
        let cwd = tree.dir.join(&self.prefix);
        let changed = self.oracle.changes(&cwd);
        if !changed.is_empty() {
            let words: Vec<String> = changed.iter().map(crate::verdict::message::change_in_words).collect();
            return refused(format!("it changed the check: {}", words.join(", ")));
        }
        match self.verify_in(cwd).run() {
            Ok(outcome) if outcome.passed() => Ok((commit, true, "verified here".into())),
            Ok(outcome) => Ok((commit, false, format!("verify fails here ({})", outcome.describe()))),
            Err(e) => refused(format!("verify could not run: {e}")),
        }
    }
}

/// The attempt's number at the end of its ref.
fn name_tail(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or_default()
}

/// The table of attempts and the winner; with `--json`, one JSON object saying the same.
fn report(
    judge: &Judge<'_>,
    remote: &str,
    verify: &str,
    rows: &[Row],
    winner: Option<u32>,
    json: bool,
) -> Outcome {
    let code = if winner.is_some() { Code::Success } else { Code::Refused };
    let won = winner.and_then(|n| rows.iter().find(|row| row.attempt == n));
    if json {
        let winner = won.map(|row| json!({"attempt": row.attempt, "ref": row.git_ref, "commit": row.commit}));
        let event = json!({"event": "pick", "run": judge.id, "remote": remote, "base": judge.base,
            "verify": verify, "winner": winner, "attempts": rows});
        return Outcome { code, stdout: event.to_string() };
    }
    let mut text = format!(
        "for-loop: run {}: attempts from {remote} re-checked here on {} with `{verify}`",
        judge.id, judge.base
    );
    for row in rows {
        let number = if row.attempt == 0 { "?".to_string() } else { row.attempt.to_string() };
        let said = row.claim.as_ref().map(|c| format!("; it {}", c.describe())).unwrap_or_default();
        let commit = row.commit.as_deref().map(|c| format!(" {c}")).unwrap_or_default();
        text.push_str(&format!("\n  attempt {number}: {}{said}\n    {}{commit}", row.detail, row.git_ref));
    }
    text.push_str(&match won {
        Some(row) => format!(
            "\nwinner: attempt {}, {} (commit {})\n  see it: git diff {} {}",
            row.attempt,
            row.git_ref,
            row.commit.as_deref().unwrap_or_default(),
            judge.base,
            row.git_ref
        ),
        None => "\nno attempt verified here: there is no winner".to_string(),
    });
    Outcome { code, stdout: text }
}
