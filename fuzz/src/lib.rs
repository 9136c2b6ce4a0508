//! The fuzz targets' bodies: each feeds one of the engine's readers (through
//! `for_loop_core::fuzzing`) and asserts what must hold of its answer for any input. A panic,
//! here or in the engine, is a crash libFuzzer keeps.
//!
//! The invariants are the honest ones: what a reader promises whatever it is given (a value it
//! returns is made of the input, so never larger than it; a file the store writes reads back as
//! what was written; a streamed read agrees with a whole one), not what it happens to do today.

use for_loop_core::fuzzing;

/// A JSON string decodes to no more bytes than it takes in the input (`\uXXXX` escapes shrink).
fn within(value: Option<&str>, input: &[u8], what: &str) {
    if let Some(value) = value {
        assert!(
            value.len() <= input.len(),
            "{what} is {} bytes, from {} bytes of input",
            value.len(),
            input.len()
        );
    }
}

/// A host's turn-end event on the Stop hook's stdin.
pub fn stop_event(host: &str, data: &[u8]) {
    let read = fuzzing::stop_event(host, data);
    if let Ok(event) = &read {
        within(Some(&event.session_id), data, "the session id");
        within(event.last_message.as_deref(), data, "the last message");
        within(event.transcript.as_ref().and_then(|p| p.to_str()), data, "the transcript path");
    }
    // Reading is a function of the bytes: the same event read again gives the same answer.
    assert_eq!(read, fuzzing::stop_event(host, data));
    // The guess for a hook line without `--host` names a host the engine serves.
    if let Some(guessed) = fuzzing::guessed_host(data) {
        assert!(fuzzing::hosts().contains(&guessed), "guessed {guessed}");
    }
}

/// The text a user submitted, read by the prompt hook of each host.
pub fn user_command(data: &[u8]) {
    let prompt = String::from_utf8_lossy(data);
    for host in fuzzing::hosts() {
        let Some(command) = fuzzing::user_command(host, &prompt) else { continue };
        // The arguments are the rest of the prompt, exactly as typed, after the name.
        assert!(prompt.ends_with(&command.args), "{command:?}");
        assert!(prompt.trim_start().starts_with(&command.name), "{command:?}");
        assert!(command.name.len() + command.args.len() <= prompt.len(), "{command:?}");
    }
}

/// A loop's state file, as the store reads it.
pub fn state_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Frontmatter: what is split joins back into a file that splits the same way.
    if let Some((yaml, body)) = fuzzing::frontmatter_split(text) {
        assert!(yaml.len() + body.len() <= text.len());
        let joined = fuzzing::frontmatter_join(yaml, body);
        assert_eq!(fuzzing::frontmatter_split(&joined), Some((yaml, body)), "joined: {joined:?}");
    }
    let Ok(state) = fuzzing::state(text) else { return };
    assert!(state.task().len() <= text.len());
    // A state that reads renders, and what it renders reads back as the same state and renders
    // the same text: the store rewrites the file at every stop.
    let rendered = state.render().expect("a state that was read renders");
    let again = fuzzing::state(&rendered)
        .unwrap_or_else(|e| panic!("the rendered state does not read: {e}\n{rendered}"));
    assert_eq!(state, again, "rendered:\n{rendered}");
    assert_eq!(again.render().as_deref(), Ok(rendered.as_str()));
}

/// The argument text of `/for-loop`.
pub fn loop_request(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let Ok(request) = fuzzing::loop_request(&raw) else { return };
    let (max_iterations, max_timeout, max_task) = fuzzing::REQUEST_LIMITS;
    assert!(!request.task.trim().is_empty(), "{request:?}");
    assert!(request.task.len() <= raw.len() && request.task.len() <= max_task, "{request:?}");
    assert!((1..=max_iterations).contains(&request.max_iterations), "{request:?}");
    assert!((1..=max_timeout).contains(&request.verify_timeout_secs), "{request:?}");
    within(request.verify.as_deref(), raw.as_bytes(), "the verify command");
    assert!(request.protect.iter().map(String::len).sum::<usize>() <= raw.len(), "{request:?}");
}

/// A shell command line the agent asks to run, as the guard reads it. The first byte says
/// whether variables and `~` have values.
pub fn shell_command(data: &[u8]) {
    let Some((&mode, line)) = data.split_first() else { return };
    let line = String::from_utf8_lossy(line);
    let (vars, home): (&[(&str, &str)], _) = if mode & 1 == 1 {
        (
            &[("HOME", "/home/u"), ("FOR_LOOP_HOME", "/home/u/.local/state/for-loop"), ("X", "a b")],
            Some("/home/u"),
        )
    } else {
        (&[], None)
    };
    let commands = fuzzing::shell_commands(&line, vars, home);
    // Without a `$`, a `~` or a backtick, nothing is expanded or substituted (a substitution's
    // commands are read on their own and also kept in the word): unquoting and splitting only
    // remove text.
    if !line.contains(['$', '~', '`']) {
        let words: usize =
            commands.iter().flat_map(|c| c.words.iter().chain(&c.writes)).map(String::len).sum();
        assert!(
            words <= line.len(),
            "{} bytes of words from a {}-byte line: {commands:?}",
            words,
            line.len()
        );
    }
}

/// Verify's output, streamed past the test-runner summary scanner.
pub fn test_summary(data: &[u8]) {
    // The first bytes choose where the stream is cut; the rest is the output.
    let (cuts, output) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = cuts.iter().map(|b| usize::from(*b) * output.len() / 255).collect();
    let whole = fuzzing::test_summary(output, &[]);
    assert!(whole.suites() <= fuzzing::MAX_SUITES);
    // However the output arrives in pieces, it sums up the same.
    assert_eq!(whole, fuzzing::test_summary(output, &cuts), "cut at {cuts:?}");
}

/// Verify's output, read for the failures it reports by name.
pub fn failure_digest(data: &[u8]) {
    // The first bytes choose where the stream is cut; the rest is the output.
    let (cuts, output) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = cuts.iter().map(|b| usize::from(*b) * output.len() / 255).collect();
    let whole = fuzzing::failure_digest(output, &[]);
    // However the output arrives in pieces, it reads the same.
    assert_eq!(whole, fuzzing::failure_digest(output, &cuts), "cut at {cuts:?}");
    let (names, details, chars, _) = fuzzing::FAILURE_BOUNDS;
    assert!(whole.names().len() <= names);
    assert!(whole.most_details() <= details);
    let mut seen = std::collections::HashSet::new();
    for name in whole.names() {
        assert!(seen.insert(name), "{name:?} twice");
    }
    for text in whole.texts() {
        // Cut with a mark of a few dozen characters; nothing that moves the cursor or hides text.
        assert!(text.chars().count() <= chars + 40, "{} characters", text.chars().count());
        assert!(!text.chars().any(|c| c.is_control() && c != '\t'), "{text:?}");
    }
}

/// A metric command's output, and the metric flags' values.
pub fn metric_output(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some((value, name)) = fuzzing::metric_value(&text) {
        assert!(value.is_finite(), "{value}");
        if let Some(name) = name {
            assert!(!name.is_empty() && name.trim() == name && name.len() <= text.len(), "{name:?}");
        }
    }
    let [target, min_gain, direction] = fuzzing::metric_flags(&text);
    // What the engine shows of a flag it took, it takes back as the same flag.
    if let Ok(shown) = target {
        assert_eq!(fuzzing::metric_flags(&shown)[0].as_ref().ok(), Some(&shown), "{text:?}");
    }
    if let Ok(shown) = min_gain {
        assert_eq!(fuzzing::metric_flags(&shown)[1].as_ref().ok(), Some(&shown), "{text:?}");
    }
    if let Ok(shown) = direction {
        assert_eq!(fuzzing::metric_flags(&shown)[2].as_ref().ok(), Some(&shown), "{text:?}");
    }
}

/// A Claude Code transcript, read for the current turn.
pub fn transcript(data: &[u8]) {
    let turn = fuzzing::transcript(data).expect("a scratch file reads");
    within(turn.text.as_deref(), data, "the turn's text");
    // The shortest tool call a record can hold is `{"type":"tool_use"}`.
    assert!(turn.tool_uses * r#"{"type":"tool_use"}"#.len() <= data.len(), "{turn:?}");
}

/// A Claude Code transcript, read for its token usage at three stops.
pub fn usage(data: &[u8]) {
    let Some((&cut, data)) = data.split_first() else { return };
    let (first, second) = data.split_at(usize::from(cut).min(data.len()));
    let [one, two, three] = fuzzing::usage_reads(first, second).expect("a scratch file reads");
    // The cursor stops after a whole line, inside the file.
    for (read, len) in [(&one, first.len()), (&two, data.len()), (&three, data.len())] {
        let offset = usize::try_from(read.offset).expect("a small offset");
        assert!(offset <= len, "{read:?}");
        assert!(offset == 0 || data[offset - 1] == b'\n', "{read:?}");
    }
    // Appending never takes tokens away, and a read that finds nothing new counts nothing.
    assert!(two.counted >= one.counted, "{one:?} then {two:?}");
    assert_eq!(two, three);
}

/// A ledger (and lessons file) read by the store's line readers.
pub fn ledger(data: &[u8]) {
    let Some((&n, data)) = data.split_first() else { return };
    let n = usize::from(n % 16);
    let read = fuzzing::ledger(data, n, "l1").expect("a scratch file reads");
    assert!(read.last.len() <= n && read.lessons <= n, "{read:?}");
    // An entry the ledger holds is written back as the line it reads as.
    assert_eq!(read.last, read.last_again);
    assert!(read.forged_streak as usize <= read.since_last_verdict, "{read:?}");
    // The line reader walks back over the last `max_bytes`: it hands out every non-empty line
    // that lies wholly inside them, last first, and nothing else.
    let max_bytes = n as u64 * 7;
    let lines = fuzzing::reverse_lines(data, max_bytes).expect("a scratch file reads");
    let from = data.len().saturating_sub(usize::try_from(max_bytes).expect("small"));
    let window = &data[from..];
    let whole = if from == 0 {
        window
    } else {
        // The first piece may be the end of a longer line: the reader cannot tell, and drops it.
        window.iter().position(|b| *b == b'\n').map_or(&[][..], |at| &window[at + 1..])
    };
    let mut expected: Vec<Vec<u8>> =
        whole.split(|b| *b == b'\n').filter(|line| !line.is_empty()).map(<[u8]>::to_vec).collect();
    expected.reverse();
    assert_eq!(lines, expected, "reading {max_bytes} bytes");
}

/// A plan file (`--plan`): a Markdown checklist, or a `prd.json` when the first byte is odd.
pub fn plan(data: &[u8]) {
    let Some((first, bytes)) = data.split_first() else { return };
    let Ok(stories) = fuzzing::plan(bytes, first % 2 == 1) else { return };
    assert!(!stories.is_empty() && stories.len() <= fuzzing::MAX_STORIES, "{}", stories.len());
    for story in &stories {
        // Everything a story holds came from the file, trimmed: nothing is made up or grows.
        assert!(!story.title.trim().is_empty() && story.title.len() <= bytes.len(), "{story:?}");
        assert!(story.details.len() <= bytes.len() + 64 * story.details.lines().count(), "{story:?}");
        assert!(
            story.verify.as_ref().is_none_or(|v| !v.trim().is_empty() && v.len() <= bytes.len()),
            "{story:?}"
        );
        assert!(!story.id.is_empty(), "{story:?}");
    }
    // The same bytes read the same.
    assert_eq!(fuzzing::plan(bytes, first % 2 == 1).ok(), Some(stories));
}
