//! The check's programs: what the check runs from outside the project, part of the oracle.
//!
//! A check is more than its files. `python3 -m pytest` runs whatever `python3` verify's `PATH`
//! finds first, which an agent can put in `~/.local/bin` (a stock `~/.profile` puts it first);
//! and every Python start runs the `.pth` files and `sitecustomize`/`usercustomize` on its path,
//! which an agent can put in the user's site-packages. Either makes every check exit 0 without
//! touching a file of the project. So at the loop's start the oracle also records:
//!
//! - each program the check's command line and its scripts name, as verify's `PATH` resolves it
//!   (a name the command line gives that `PATH` does not find is recorded as not found: one that
//!   appears later is a change too);
//! - the interpreter each of those files names on its first line (`#!`), resolved the same way;
//! - for a Python interpreter, every start-up hook in its site directories and the user's
//!   (`*.pth`, `sitecustomize.py`, `usercustomize.py`), watched by directory, so that a new one
//!   is seen where none was;
//! - the environment variables an interpreter or a shell reads before it runs anything
//!   ([`START_VARIABLES`]).
//!
//! At each stop they are looked at again, and any difference is a change of the check: the name
//! that resolves elsewhere, the file that changed, the hook that appeared, the variable that
//! differs. Files are known by their length, modification time and inode, and the small ones by
//! their digest too, so a stop spends a few hundred stats, not a read of the interpreter.
//!
//! What this cannot see: a program the check finds at run time by a path it computes, a module
//! a `.pth` file imports (only the hooks themselves are fingerprinted, not all of site-packages),
//! a shared library, and a change made and undone within one verify run (the watch of the
//! check's files covers the project's files only).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checks::oracle::{ChangeKind, OracleChange};
use crate::support::digest::sha256_hex;
use crate::support::read::bounded_read;

/// Program names recorded at most.
const MAX_NAMES: usize = 64;
/// Files recorded at most (programs, interpreters, start-up hooks).
const MAX_FILES: usize = 256;
/// Files up to this size are known by their digest as well as their length, time and inode.
const MAX_DIGESTED_BYTES: u64 = 64 * 1024;
/// Scripts larger than this are not read for the programs they name.
const MAX_SCRIPT_BYTES: u64 = 256 * 1024;
/// How a name that `PATH` does not find is recorded.
const NOT_FOUND: &str = "not found";

/// Environment variables an interpreter or a shell reads before it runs the check's code.
pub(crate) const START_VARIABLES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "LD_PRELOAD",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "PYTHONHOME",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONNOUSERSITE",
    "RUBYLIB",
    "RUBYOPT",
];

/// The words of a shell that are no program: keywords and the commands a shell runs itself.
const SHELL_OWN: &[&str] = &[
    "!", ".", ":", "[", "[[", "]", "]]", "alias", "break", "case", "cd", "command", "continue", "do", "done",
    "echo", "elif", "else", "esac", "eval", "exec", "exit", "export", "false", "fi", "for", "function",
    "getopts", "hash", "if", "in", "local", "printf", "pwd", "read", "readonly", "return", "set", "shift",
    "source", "test", "then", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset",
    "until", "wait", "while",
];

/// Where the check's programs come from: the environment verify runs in.
pub(crate) struct Surroundings {
    /// Verify's `PATH`.
    pub(crate) path: Option<OsString>,
    /// The user's home, for Python's user site-packages.
    pub(crate) home: Option<PathBuf>,
    /// The value of each of [`START_VARIABLES`] that is set.
    pub(crate) variables: BTreeMap<String, String>,
}

impl Surroundings {
    /// This process's environment, which verify inherits.
    pub(crate) fn of_this_process() -> Surroundings {
        let variables = START_VARIABLES
            .iter()
            .filter_map(|name| {
                std::env::var_os(name).map(|v| ((*name).to_string(), v.to_string_lossy().into_owned()))
            })
            .collect();
        Surroundings {
            path: std::env::var_os("PATH"),
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            variables,
        }
    }
}

/// What the check's programs were at start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Programs {
    /// Each program name the check uses and the file `PATH` found for it (or `not found`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub names: BTreeMap<String, String>,
    /// Each file outside the project the check stands on (absolute path) and its fingerprint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Directories of start-up hooks, one component of each may hold a `*`
    /// (`~/.local/lib/python*/site-packages`): a hook in one that is not among `files` is new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_dirs: Vec<String>,
    /// The start-up variables that were set, by name, as digests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
}

impl Programs {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Programs::default()
    }

    /// Records the programs that `commands` and the project's `scripts` (relative to `cwd`)
    /// run, as `around` resolves them.
    pub(crate) fn capture(
        cwd: &Path,
        commands: &[&str],
        scripts: &[String],
        around: &Surroundings,
    ) -> Programs {
        let mut programs = Programs::default();
        if commands.is_empty() {
            return programs;
        }
        let mut to_read: Vec<PathBuf> = scripts.iter().map(|s| cwd.join(s)).collect();
        for command in commands {
            for word in command_words(command) {
                if word.contains('/') {
                    let path = cwd.join(&word);
                    if !path.starts_with(cwd) && is_executable(&path) {
                        to_read.push(path);
                    }
                } else if is_program_name(&word) {
                    programs.name(&word, around, cwd, &mut to_read);
                }
            }
        }
        // The scripts' words and first lines, then the first lines of what they led to.
        let mut read = 0;
        while read < to_read.len() && programs.files.len() < MAX_FILES {
            let file = to_read[read].clone();
            read += 1;
            let inside = file.starts_with(cwd);
            if !inside {
                programs.file(&file);
            }
            let Ok(bytes) = bounded_read::read(&file, MAX_SCRIPT_BYTES) else { continue };
            if bytes.contains(&0) {
                // A binary: nothing to read in it.
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Some(interpreter) = shebang(&text) {
                for word in interpreter {
                    if word.starts_with('/') {
                        if !to_read.contains(&PathBuf::from(&word)) {
                            to_read.push(PathBuf::from(&word));
                        }
                    } else if is_program_name(&word) {
                        programs.name(&word, around, cwd, &mut to_read);
                    }
                }
            }
            if inside {
                // Only a project script's words: another program's text is its own business.
                for word in script_words(&text) {
                    if programs.names.len() >= MAX_NAMES {
                        break;
                    }
                    if resolve(&word, around.path.as_deref(), cwd).is_some() {
                        programs.name(&word, around, cwd, &mut to_read);
                    }
                }
            }
        }
        let pythons: Vec<PathBuf> = programs
            .files
            .keys()
            .map(PathBuf::from)
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("python")))
            .collect();
        for python in pythons {
            programs.add_python_hooks(&python, around.home.as_deref(), &around.variables);
        }
        programs.variables =
            around.variables.iter().map(|(k, v)| (k.clone(), sha256_hex(v.as_bytes()))).collect();
        programs
    }

    /// What differs now from the start, as `around` resolves it.
    pub(crate) fn changes(&self, cwd: &Path, around: &Surroundings) -> Vec<OracleChange> {
        let mut changes = Vec::new();
        let change = |path: String| OracleChange { path, kind: ChangeKind::Outside };
        for (name, was) in &self.names {
            let now = resolve(name, around.path.as_deref(), cwd).map_or(NOT_FOUND.to_string(), |p| slash(&p));
            if now != *was {
                changes.push(change(format!("{name} on PATH is {now}, was {was}")));
            }
        }
        for (file, was) in &self.files {
            let now = fingerprint(Path::new(file));
            if now != *was {
                let how = if now == NOT_FOUND { "deleted" } else { "modified" };
                changes.push(change(format!("{file} {how}")));
            }
        }
        for dir in &self.hook_dirs {
            for hook in hooks_in(dir) {
                if self.files.len() < MAX_FILES && !self.files.contains_key(&hook) {
                    changes.push(change(format!("{hook} added")));
                }
            }
        }
        let names: std::collections::BTreeSet<&String> =
            self.variables.keys().chain(around.variables.keys()).collect();
        for name in names {
            let now = around.variables.get(name).map(|v| sha256_hex(v.as_bytes()));
            if now.as_ref() != self.variables.get(name) {
                let how = match (self.variables.contains_key(name), now.is_some()) {
                    (false, _) => "set",
                    (_, false) => "unset",
                    _ => "changed",
                };
                changes.push(change(format!("the environment variable {name} {how}")));
            }
        }
        changes
    }

    /// Records `name` as `PATH` resolves it, and queues its file to be read for its `#!`.
    fn name(&mut self, name: &str, around: &Surroundings, cwd: &Path, to_read: &mut Vec<PathBuf>) {
        if self.names.contains_key(name) || self.names.len() >= MAX_NAMES {
            return;
        }
        let found = resolve(name, around.path.as_deref(), cwd);
        self.names.insert(name.to_string(), found.as_deref().map_or(NOT_FOUND.to_string(), slash));
        if let Some(found) = found
            && !to_read.contains(&found)
        {
            to_read.push(found);
        }
    }

    fn file(&mut self, path: &Path) {
        if self.files.len() < MAX_FILES {
            self.files.entry(slash(path)).or_insert_with(|| fingerprint(path));
        }
    }

    /// The site directories of the Python interpreter at `python` (as named, and as its links
    /// resolve), and the user's, and the start-up hooks in them now.
    fn add_python_hooks(&mut self, python: &Path, home: Option<&Path>, variables: &BTreeMap<String, String>) {
        let mut prefixes: Vec<PathBuf> = Vec::new();
        for path in [Some(python.to_path_buf()), fs::canonicalize(python).ok()].into_iter().flatten() {
            if let Some(prefix) = path.parent().and_then(Path::parent) {
                prefixes.push(prefix.to_path_buf());
            }
        }
        let mut dirs: Vec<String> = Vec::new();
        for prefix in &prefixes {
            for below in [
                "lib/python*",
                "lib/python*/site-packages",
                "lib/python*/dist-packages",
                "lib/python3/dist-packages",
                "local/lib/python*/dist-packages",
                "local/lib/python*/site-packages",
            ] {
                dirs.push(slash(&prefix.join(below)));
            }
        }
        // The user's site-packages, which needs no more than the user's rights to write.
        let user_base =
            variables.get("PYTHONUSERBASE").map(PathBuf::from).or_else(|| home.map(|h| h.join(".local")));
        if let Some(base) = user_base {
            dirs.push(slash(&base.join("lib/python*/site-packages")));
        }
        for dir in dirs {
            if self.hook_dirs.contains(&dir) {
                continue;
            }
            for hook in hooks_in(&dir) {
                self.file(Path::new(&hook));
            }
            self.hook_dirs.push(dir);
        }
    }
}

/// The file `name` runs as a shell finds it on `path` (a relative entry is taken from `cwd`):
/// the first executable file of that name.
fn resolve(name: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| cwd.join(dir).join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = fs::metadata(path) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// What a file outside the project is: its length, modification time and inode, and for a
/// small one its digest; `not found` when it is not there.
fn fingerprint(path: &Path) -> String {
    let Ok(meta) = fs::metadata(path) else { return NOT_FOUND.to_string() };
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    let mut print = format!("{}:{mtime}:{inode}", meta.len());
    if meta.is_file() && meta.len() <= MAX_DIGESTED_BYTES {
        let digest = bounded_read::read(path, MAX_DIGESTED_BYTES)
            .map_or_else(|_| "unreadable".into(), |b| sha256_hex(&b));
        print.push_str(&format!(":{digest}"));
    }
    print
}

/// The start-up hooks in `dir` (one component of which may hold a `*`) now, sorted.
fn hooks_in(dir: &str) -> Vec<String> {
    let mut hooks: Vec<String> = expand(dir)
        .into_iter()
        .filter_map(|dir| fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|path| {
            path.file_name().and_then(OsStr::to_str).is_some_and(|name| {
                // As Python's `site` reads them: `.pth` matched as written, whatever the file system.
                Path::new(name).extension().is_some_and(|e| e == "pth")
                    || name == "sitecustomize.py"
                    || name == "usercustomize.py"
            })
        })
        .map(|path| slash(&path))
        .take(MAX_FILES)
        .collect();
    hooks.sort();
    hooks
}

/// The directories `pattern` names: itself, or with its one `*` component matched against the
/// entries of the directory above it.
fn expand(pattern: &str) -> Vec<PathBuf> {
    let Some(star) = pattern.find('*') else { return vec![PathBuf::from(pattern)] };
    let Some(slash_before) = pattern[..star].rfind('/') else { return Vec::new() };
    let parent = &pattern[..slash_before];
    let rest = &pattern[slash_before + 1..];
    let (component, below) = rest.split_once('/').unwrap_or((rest, ""));
    let (head, tail) = component.split_once('*').unwrap_or((component, ""));
    let Ok(entries) = fs::read_dir(if parent.is_empty() { "/" } else { parent }) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(head) && n.ends_with(tail)))
        .map(|e| if below.is_empty() { e.path() } else { e.path().join(below) })
        .collect();
    dirs.sort();
    dirs
}

/// The words of a command line, one level into `sh -c "…"`.
fn command_words(command: &str) -> Vec<String> {
    let split = |text: &str| {
        shell_words::split(text).unwrap_or_else(|_| text.split_whitespace().map(str::to_string).collect())
    };
    let mut words = split(command);
    let inner: Vec<String> =
        words.iter().filter(|w| w.contains(char::is_whitespace)).flat_map(|w| split(w)).collect();
    words.extend(inner);
    words
        .into_iter()
        .flat_map(|w| w.split([';', '&', '|', '(', ')']).map(str::to_string).collect::<Vec<_>>())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Words of a script that may name a program.
fn script_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap_or(line);
        if line.trim_start().starts_with('#') {
            continue;
        }
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || "._+-".contains(c))) {
            if is_program_name(word) && !words.iter().any(|w| w == word) {
                words.push(word.to_string());
            }
        }
    }
    words
}

fn is_program_name(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 64
        && !word.starts_with(['-', '.'])
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        && word.chars().any(|c| c.is_ascii_alphabetic())
        && !SHELL_OWN.contains(&word)
}

/// The interpreter a `#!` line names, and its first argument (the program `env` runs).
fn shebang(text: &str) -> Option<Vec<String>> {
    let line = text.lines().next()?.strip_prefix("#!")?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?.to_string();
    let mut named = vec![interpreter.clone()];
    if interpreter.ends_with("/env") {
        named.extend(words.find(|w| !w.starts_with('-') && !w.contains('=')).map(str::to_string));
    }
    Some(named)
}

fn slash(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn program(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A machine: a system `bin` with a Python interpreter and its site-packages, a home with an
    /// empty `~/.local/bin` first on `PATH`, and a project whose check runs a script.
    struct Machine {
        dir: tempfile::TempDir,
    }

    impl Machine {
        fn new() -> Machine {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            program(&root.join("usr/bin/python3.12"), "\u{0}binary python\n");
            std::os::unix::fs::symlink("python3.12", root.join("usr/bin/python3")).unwrap();
            program(
                &root.join("usr/bin/pytest"),
                &format!("#!{}\nimport pytest\n", root.join("usr/bin/python3").display()),
            );
            fs::create_dir_all(root.join("usr/lib/python3.12/site-packages")).unwrap();
            fs::write(root.join("usr/lib/python3.12/site-packages/distutils-precedence.pth"), "import os\n")
                .unwrap();
            fs::create_dir_all(root.join("home/.local/bin")).unwrap();
            fs::create_dir_all(root.join("project")).unwrap();
            fs::write(root.join("project/check.sh"), "set -e\npytest -q tests\n").unwrap();
            Machine { dir }
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }

        fn cwd(&self) -> PathBuf {
            self.root().join("project")
        }

        fn around(&self) -> Surroundings {
            let path =
                std::env::join_paths([self.root().join("home/.local/bin"), self.root().join("usr/bin")])
                    .unwrap();
            Surroundings {
                path: Some(path),
                home: Some(self.root().join("home")),
                variables: BTreeMap::new(),
            }
        }

        fn capture(&self) -> Programs {
            Programs::capture(
                &self.cwd(),
                &["python3 -m pytest && sh check.sh"],
                &["check.sh".into()],
                &self.around(),
            )
        }
    }

    fn said(changes: &[OracleChange]) -> Vec<String> {
        changes.iter().map(|c| c.path.clone()).collect()
    }

    #[test]
    fn records_the_programs_their_interpreters_and_pythons_start_up_hooks() {
        let m = Machine::new();
        let programs = m.capture();
        let root = slash(m.root());
        assert_eq!(programs.names["python3"], format!("{root}/usr/bin/python3"));
        assert_eq!(programs.names["pytest"], format!("{root}/usr/bin/pytest"), "named by check.sh");
        assert!(programs.names.contains_key("sh"), "{:?}", programs.names);
        assert!(
            !programs.names.contains_key("set") && !programs.names.contains_key("tests"),
            "{:?}",
            programs.names
        );
        assert!(programs.files.contains_key(&format!("{root}/usr/bin/python3")), "{:?}", programs.files);
        assert!(
            programs
                .files
                .contains_key(&format!("{root}/usr/lib/python3.12/site-packages/distutils-precedence.pth")),
            "{:?}",
            programs.files
        );
        assert!(programs.hook_dirs.contains(&format!("{root}/home/.local/lib/python*/site-packages")));
        assert!(programs.changes(&m.cwd(), &m.around()).is_empty(), "nothing changed");
    }

    /// The attack: a `python3` that exits 0 put first on `PATH`.
    #[test]
    fn a_program_put_first_on_path_is_a_change_named_with_where_it_now_resolves() {
        let m = Machine::new();
        let programs = m.capture();
        program(&m.root().join("home/.local/bin/python3"), "#!/bin/sh\nexit 0\n");
        let changes = programs.changes(&m.cwd(), &m.around());
        let root = slash(m.root());
        assert_eq!(
            said(&changes),
            [format!("python3 on PATH is {root}/home/.local/bin/python3, was {root}/usr/bin/python3")]
        );
        assert_eq!(changes[0].kind, ChangeKind::Outside);
        fs::remove_file(m.root().join("home/.local/bin/python3")).unwrap();
        assert!(programs.changes(&m.cwd(), &m.around()).is_empty(), "removing it is the way back");
    }

    /// The attack: a `.pth` in the user's site-packages, which did not exist at start, that
    /// makes every Python start exit 0.
    #[test]
    fn a_start_up_hook_in_the_users_site_packages_is_a_change() {
        let m = Machine::new();
        let programs = m.capture();
        let site = m.root().join("home/.local/lib/python3.12/site-packages");
        fs::create_dir_all(&site).unwrap();
        fs::write(site.join("zz.pth"), "import os; os._exit(0)\n").unwrap();
        fs::write(site.join("module.py"), "not a hook\n").unwrap();
        let changes = programs.changes(&m.cwd(), &m.around());
        assert_eq!(said(&changes), [format!("{}/zz.pth added", slash(&site))]);
        let system = m.root().join("usr/lib/python3.12/site-packages/distutils-precedence.pth");
        fs::write(&system, "import os; os._exit(0)\n").unwrap();
        fs::write(site.join("sitecustomize.py"), "import os; os._exit(0)\n").unwrap();
        let changes = said(&programs.changes(&m.cwd(), &m.around()));
        assert!(changes.contains(&format!("{} modified", slash(&system))), "{changes:?}");
        assert!(changes.contains(&format!("{}/sitecustomize.py added", slash(&site))), "{changes:?}");
    }

    #[test]
    fn a_changed_interpreter_a_program_that_appears_and_a_start_variable_are_changes() {
        let m = Machine::new();
        let around = m.around();
        let programs = Programs::capture(&m.cwd(), &["mytool --check"], &[], &around);
        assert_eq!(programs.names["mytool"], NOT_FOUND);
        program(&m.root().join("home/.local/bin/mytool"), "#!/bin/sh\nexit 0\n");
        assert_eq!(programs.changes(&m.cwd(), &around).len(), 1, "a program that was not found appeared");
        let programs = m.capture();
        program(&m.root().join("usr/bin/pytest"), "#!/bin/sh\nexit 0\n");
        let mut around = m.around();
        around.variables.insert("NODE_OPTIONS".into(), "--require /tmp/x.js".into());
        let changes = said(&programs.changes(&m.cwd(), &around));
        assert!(changes.contains(&format!("{}/usr/bin/pytest modified", slash(m.root()))), "{changes:?}");
        assert!(changes.contains(&"the environment variable NODE_OPTIONS set".to_string()), "{changes:?}");
    }

    #[test]
    fn hostile_and_empty_inputs_record_nothing_and_never_fail() {
        let m = Machine::new();
        let around = Surroundings { path: None, home: None, variables: BTreeMap::new() };
        assert!(Programs::capture(&m.cwd(), &[], &[], &m.around()).is_empty());
        let odd = Programs::capture(
            &m.cwd(),
            &["'unclosed \"$(rm -rf /)` ; ;; && ||"],
            &["nope.sh".into()],
            &around,
        );
        assert!(odd.files.is_empty() && odd.changes(&m.cwd(), &around).is_empty(), "{odd:?}");
        let long = "x".repeat(100_000);
        let many = (0..1000).map(|n| format!("tool{n}")).collect::<Vec<_>>().join(" ");
        let bounded = Programs::capture(&m.cwd(), &[&long, &many], &[], &m.around());
        assert!(bounded.names.len() <= MAX_NAMES);
        assert_eq!(expand("/no/such/dir/python*/site-packages"), Vec::<PathBuf>::new());
    }
}
