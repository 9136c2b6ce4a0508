//! A shell command line as the guard reads it: simple commands with their words expanded the way
//! the shell would expand them, as far as that can be known before the command runs.
//!
//! The guard must see `rm -rf "$FOR_LOOP_HOME"/sessions`, `can''cel`, `"ca"ncel`, `~/.local/...`
//! and `X=~/.local; rm -rf $X` as what they are. So words are unquoted, `$NAME`, `${NAME}`,
//! `${NAME:-default}` and a leading `~` are expanded (from the hook's own environment and from
//! assignments earlier in the line), and the line is cut into simple commands at `;`, `&&`, `||`,
//! `|`, `&`, newlines, `(`, `)`, and around command substitutions, whose contents are simple
//! commands of their own. What cannot be known (a substitution's output, a glob's matches) stays
//! as written. This is a reading aid for a convenience check, not a shell.

use std::cell::Cell;
use std::collections::HashMap;

/// Substitutions and `${NAME:-default}`s nested deeper than this are not read inside: their text
/// stays in the word as written. A shell line nests two or three; each level reads the rest of
/// the line again, so without a bound a line of `$($($(...` takes time quadratic in its length.
const MAX_DEPTH: usize = 8;

/// The most bytes that expanding variables and `~` may add to one line's words, all commands
/// together. Past it a variable stays as written. `X=$X$X`, repeated, doubles a value at each
/// step: without a bound, forty of them ask for a terabyte.
const MAX_EXPANSION_BYTES: usize = 1 << 20;

/// One simple command: its words, expanded and unquoted, and the files it redirects output to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SimpleCommand {
    pub(crate) words: Vec<String>,
    /// Targets of `>`, `>>`, `>|`, `&>`, `N>`.
    pub(crate) writes: Vec<String>,
}

/// Splits `line` into simple commands, expanding variables with `lookup` and `~` with `home`.
pub(crate) fn parse(
    line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    home: Option<&str>,
) -> Vec<SimpleCommand> {
    parse_nested(line, lookup, home, 0, &Cell::new(MAX_EXPANSION_BYTES))
}

/// [`parse`] of text `depth` substitutions deep, with what is left of the line's `budget` for
/// expansions.
fn parse_nested(
    line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    home: Option<&str>,
    depth: usize,
    budget: &Cell<usize>,
) -> Vec<SimpleCommand> {
    let mut parser = Parser {
        chars: line.chars().collect(),
        pos: 0,
        lookup,
        home,
        assigned: HashMap::new(),
        depth,
        budget,
    };
    parser.commands()
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    home: Option<&'a str>,
    /// `NAME=value` seen earlier in the line.
    assigned: HashMap<String, String>,
    /// How many substitutions deep this text is.
    depth: usize,
    /// Bytes that expansions may still add, shared by the whole line ([`MAX_EXPANSION_BYTES`]).
    budget: &'a Cell<usize>,
}

/// What ended a word.
#[derive(PartialEq, Eq)]
enum Break {
    /// A blank: the simple command goes on.
    Blank,
    /// An operator or the end: the simple command is over.
    Command,
    /// A redirection of output: the next word is written.
    Redirect,
    /// A redirection of input (`<`, `<<`): the next word is read.
    Input,
}

/// A word as it is read: its text so far, whether any characters formed it (`""` does), and
/// the simple commands of the substitutions inside it.
#[derive(Default)]
struct PartialWord {
    text: String,
    started: bool,
    nested: Vec<SimpleCommand>,
}

impl PartialWord {
    fn push(&mut self, c: char) {
        self.text.push(c);
        self.started = true;
    }

    fn push_str(&mut self, text: &str) {
        self.text.push_str(text);
        self.started = true;
    }

    fn end(self, ended: Break) -> (Option<String>, Break, Vec<SimpleCommand>) {
        (self.started.then_some(self.text), ended, self.nested)
    }
}

impl Parser<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn commands(&mut self) -> Vec<SimpleCommand> {
        let mut all = Vec::new();
        let mut current = SimpleCommand::default();
        let mut next_is_write = false;
        let mut next_is_input = false;
        while self.pos < self.chars.len() {
            let (word, ended, nested) = self.word();
            all.extend(nested);
            if let Some(word) = word {
                if next_is_write {
                    current.writes.push(word);
                } else if next_is_input {
                    // A heredoc delimiter or an input file: read, not run.
                } else if current.words.is_empty() && is_assignment(&word) {
                    let (name, value) = word.split_once('=').unwrap_or_default();
                    self.assigned.insert(name.to_string(), value.to_string());
                } else {
                    current.words.push(word);
                }
                next_is_write = false;
                next_is_input = false;
            }
            match ended {
                Break::Blank => {}
                Break::Redirect => next_is_write = true,
                Break::Input => next_is_input = true,
                Break::Command => {
                    if !current.words.is_empty() || !current.writes.is_empty() {
                        all.push(std::mem::take(&mut current));
                    }
                    next_is_write = false;
                    next_is_input = false;
                }
            }
        }
        if !current.words.is_empty() || !current.writes.is_empty() {
            all.push(current);
        }
        all
    }

    /// Reads one word; returns it (if any characters formed one), what ended it, and the simple
    /// commands of any substitution inside it.
    fn word(&mut self) -> (Option<String>, Break, Vec<SimpleCommand>) {
        let mut word = PartialWord::default();
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            match (quote, c) {
                (Some('\''), '\'') | (Some('"'), '"') => {
                    quote = None;
                    self.pos += 1;
                }
                (Some('\''), _) => {
                    word.text.push(c);
                    self.pos += 1;
                }
                (None, '\'' | '"') => {
                    quote = Some(c);
                    word.started = true;
                    self.pos += 1;
                }
                (_, '\\') => self.escape(&mut word),
                (_, '$') if self.peek(1) == Some('(') => {
                    self.pos += 2;
                    self.substitution(')', &mut word);
                }
                (_, '`') => {
                    self.pos += 1;
                    self.substitution('`', &mut word);
                }
                (_, '$') => {
                    self.pos += 1;
                    let value = self.variable();
                    word.push_str(&value);
                }
                // `~` at a word's start, or after `=` or `:` in an assignment (`X=~/a:~/b`).
                (None, '~') if !word.started || word.text.ends_with('=') || word.text.ends_with(':') => {
                    self.pos += 1;
                    word.push_str(self.tilde_expansion());
                }
                (None, ' ' | '\t') => {
                    self.pos += 1;
                    return word.end(Break::Blank);
                }
                (None, '\n' | ';' | '(' | ')' | '{' | '}')
                    if !word.started || c == '\n' || c == ';' || c == ')' =>
                {
                    self.pos += 1;
                    return word.end(Break::Command);
                }
                (None, '|' | '&') => return word.end(self.control_operator(c)),
                (None, '>') => {
                    // `2>` : a number right before `>` is the descriptor, not a word.
                    if !word.text.is_empty() && word.text.chars().all(|d| d.is_ascii_digit()) {
                        word.text.clear();
                        word.started = false;
                    }
                    return word.end(self.output_redirection());
                }
                (None, '<') => return word.end(self.input_redirection()),
                _ => {
                    word.push(c);
                    self.pos += 1;
                }
            }
        }
        word.end(Break::Command)
    }

    /// A backslash: the character after it is taken as it is, and a backslash-newline joins
    /// two lines.
    fn escape(&mut self, word: &mut PartialWord) {
        self.pos += 1;
        if let Some(next) = self.peek(0) {
            if next != '\n' {
                word.text.push(next);
            }
            self.pos += 1;
        }
        word.started = true;
    }

    /// A command substitution, its opening read. What it runs is parsed as commands of their
    /// own; its output is unknown, so what it runs stays visible in the word.
    fn substitution(&mut self, close: char, word: &mut PartialWord) {
        let inner = self.until_closing(close);
        word.nested.extend(self.nested(&inner));
        word.push_str(&format!("$({inner})"));
    }

    /// What a `~` just read stands for: the home directory when the `~` is alone or starts a
    /// path, else itself (`~user` is not expanded).
    fn tilde_expansion(&self) -> &str {
        let alone = matches!(self.peek(0), None | Some('/' | ' ' | '\t' | '\n' | ';' | '&' | '|' | ')'));
        match (alone, self.home.filter(|home| self.spend(home.len()))) {
            (true, Some(home)) => home,
            _ => "~",
        }
    }

    /// At a `|` or `&`: `&>` and `&>>` are redirections; `&&`, `||`, `|`, `&` end the command.
    fn control_operator(&mut self, c: char) -> Break {
        if c == '&' && self.peek(1) == Some('>') {
            self.pos += 2;
            if self.peek(0) == Some('>') {
                self.pos += 1;
            }
            return Break::Redirect;
        }
        self.pos += 1;
        if self.peek(0) == Some(c) {
            self.pos += 1;
        }
        Break::Command
    }

    /// At a `>`, `>>` or `>|`: the next word is written, unless `>&2` names a descriptor.
    fn output_redirection(&mut self) -> Break {
        self.pos += 1;
        if matches!(self.peek(0), Some('>' | '|')) {
            self.pos += 1;
        }
        if self.peek(0) == Some('&') {
            // `>&2`: a descriptor, nothing written.
            self.pos += 1;
            while self.peek(0).is_some_and(|d| d.is_ascii_digit() || d == '-') {
                self.pos += 1;
            }
            return Break::Blank;
        }
        Break::Redirect
    }

    /// At a `<`, `<<` or `<<-`.
    fn input_redirection(&mut self) -> Break {
        self.pos += 1;
        while matches!(self.peek(0), Some('<' | '-')) {
            self.pos += 1;
        }
        // A heredoc's body lines are read as commands of their own: a shell fed
        // one runs them, and anything else reads data that names nothing to run.
        Break::Input
    }

    /// The text up to the matching `close`, nested parentheses counted; the position moves past it.
    fn until_closing(&mut self, close: char) -> String {
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        let mut inner = String::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match (quote, c) {
                (Some(q), _) if c == q => quote = None,
                (None, '\'' | '"') if close != '`' || c != '`' => quote = Some(c),
                (None, '(') if close == ')' => depth += 1,
                (None, _) if c == close => {
                    if depth == 0 {
                        return inner;
                    }
                    depth -= 1;
                }
                _ => {}
            }
            inner.push(c);
        }
        inner
    }

    /// `$NAME`, `${NAME}`, `${NAME:-default}`, after the `$`: its value if known, else as written.
    fn variable(&mut self) -> String {
        if self.peek(0) == Some('{') {
            self.pos += 1;
            let inner = self.until_closing('}');
            let (name, default) = match inner.split_once(":-").or_else(|| inner.split_once('-')) {
                Some((name, default)) => (name.to_string(), Some(default.to_string())),
                None => (inner.clone(), None),
            };
            return self
                .value(&name)
                .or_else(|| default.map(|d| self.expand_plain(&d)))
                .unwrap_or_else(|| format!("${{{inner}}}"));
        }
        let mut name = String::new();
        while let Some(c) = self.peek(0).filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
            name.push(c);
            self.pos += 1;
        }
        if name.is_empty() {
            return "$".into();
        }
        self.value(&name).unwrap_or_else(|| format!("${name}"))
    }

    /// The value of `name`, if it is known and the line's expansion budget still holds it.
    fn value(&self, name: &str) -> Option<String> {
        self.assigned
            .get(name)
            .cloned()
            .or_else(|| (self.lookup)(name))
            .filter(|value| self.spend(value.len()))
    }

    /// Takes `bytes` from the line's expansion budget; false, taking nothing, if it has less.
    fn spend(&self, bytes: usize) -> bool {
        let left = self.budget.get();
        left.checked_sub(bytes).inspect(|rest| self.budget.set(*rest)).is_some()
    }

    /// The simple commands of a substitution's text; none past [`MAX_DEPTH`].
    fn nested(&self, text: &str) -> Vec<SimpleCommand> {
        if self.depth >= MAX_DEPTH {
            return Vec::new();
        }
        parse_nested(text, self.lookup, self.home, self.depth + 1, self.budget)
    }

    /// A `${NAME:-default}` default, with its own variables and `~` expanded; as written past
    /// [`MAX_DEPTH`].
    fn expand_plain(&self, text: &str) -> String {
        if self.depth >= MAX_DEPTH {
            return text.to_string();
        }
        let commands = parse_nested(text, self.lookup, self.home, self.depth + 1, self.budget);
        commands.first().map(|c| c.words.join(" ")).unwrap_or_default()
    }
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        let lookup = |name: &str| match name {
            "HOME" => Some("/home/u".to_string()),
            "FOR_LOOP_HOME" => Some("/store".to_string()),
            _ => None,
        };
        parse(line, &lookup, Some("/home/u")).into_iter().map(|c| c.words).collect()
    }

    fn writes(line: &str) -> Vec<String> {
        parse(line, &|_| None, None).into_iter().flat_map(|c| c.writes).collect()
    }

    #[test]
    fn quotes_are_removed_wherever_they_are() {
        assert_eq!(words("loop-hook can''cel"), [["loop-hook", "cancel"]]);
        assert_eq!(words(r#"loop-hook "ca"ncel"#), [["loop-hook", "cancel"]]);
        assert_eq!(words(r"loop-hook c\ancel"), [["loop-hook", "cancel"]]);
        assert_eq!(words(r#"echo 'a b' "c d""#), [["echo", "a b", "c d"]]);
    }

    #[test]
    fn variables_and_home_are_expanded() {
        assert_eq!(words("rm -rf $FOR_LOOP_HOME/sessions"), [["rm", "-rf", "/store/sessions"]]);
        assert_eq!(words(r#"rm -rf "${FOR_LOOP_HOME}"/x"#), [["rm", "-rf", "/store/x"]]);
        assert_eq!(words("rm -rf ~/.local/state"), [["rm", "-rf", "/home/u/.local/state"]]);
        assert_eq!(words("rm ${XDG_STATE_HOME:-~/.local/state}/f"), [["rm", "/home/u/.local/state/f"]]);
        assert_eq!(words("X=~/.local; rm -r $X"), [vec!["rm", "-r", "/home/u/.local"]]);
        assert_eq!(words("rm '$HOME'"), [["rm", "$HOME"]], "single quotes keep text as written");
        assert_eq!(words("echo $UNKNOWN"), [["echo", "$UNKNOWN"]]);
    }

    #[test]
    fn lines_are_cut_into_simple_commands() {
        assert_eq!(
            words("sed -i 's/-/+/' calc.sh && ./check.sh; echo ok | tee log & wait"),
            vec![
                vec!["sed", "-i", "s/-/+/", "calc.sh"],
                vec!["./check.sh"],
                vec!["echo", "ok"],
                vec!["tee", "log"],
                vec!["wait"]
            ]
        );
        assert_eq!(words("(cd x && rm y)"), [vec!["cd", "x"], vec!["rm", "y"]]);
        assert_eq!(
            words("echo $(loop-hook cancel) `rm z`"),
            [vec!["loop-hook", "cancel"], vec!["rm", "z"], vec!["echo", "$(loop-hook cancel)", "$(rm z)"]]
        );
    }

    /// Found with the `shell_command` fuzz target: `X=$X$X` repeated doubled the value at each
    /// step, and forty of them asked for a terabyte; each level of `$(` or `${X:-` read the rest
    /// of the line again, so a 16 KiB line of them took most of a minute. Both are bounded, and
    /// the guard still reads what a real line holds.
    #[test]
    fn expansion_and_nesting_are_bounded() {
        let doubling = format!("X=ab; {}rm $X", "X=$X$X; ".repeat(40));
        let bytes: usize = words(&doubling).iter().flatten().map(String::len).sum();
        assert!(bytes <= MAX_EXPANSION_BYTES + doubling.len(), "{bytes} bytes of words");
        let started = std::time::Instant::now();
        for open in ["$(", "${X:-"] {
            let close = if open == "$(" { ")" } else { "}" };
            let deep = format!("{}rm x{}", open.repeat(8000), close.repeat(8000));
            assert!(!words(&deep).is_empty());
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
        assert_eq!(words("echo $(a $(b $(rm -rf ~/x)))")[0], ["rm", "-rf", "/home/u/x"]);
        assert_eq!(words("X=~/.local; Y=$X/state; rm -r $Y")[0], ["rm", "-r", "/home/u/.local/state"]);
    }

    #[test]
    fn output_redirections_name_what_is_written() {
        assert_eq!(writes("echo x > a; echo y >> b; cmd 2> c &> d >| e"), ["a", "b", "c", "d", "e"]);
        assert_eq!(writes("cmd 2>&1 >&2 < input"), Vec::<String>::new());
        assert_eq!(words("cat <<'EOF'"), [["cat"]]);
    }
}
