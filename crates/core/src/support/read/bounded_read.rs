//! Reading files we do not fully control: the state, the ledger, transcripts, oracle files.
//!
//! The model can replace any of them with something that is not a file: a FIFO (`mkfifo`) whose
//! `open` blocks until a writer comes, a link to `/dev/zero` or `/dev/urandom` that never ends, a
//! socket, a directory. Every such read goes through here: the file is opened without blocking
//! (`O_NONBLOCK`, no controlling terminal), its type is checked on the open descriptor (so it
//! cannot be swapped between the check and the read), and no read goes past a limit. A file that
//! is not a regular file, or is over the limit, is an error whose message says so; the caller
//! decides what it means (a changed oracle, an unreadable state).

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

/// Opens `path` for reading if it is a regular file (after following symlinks). Never blocks,
/// whatever the path names.
pub(crate) fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        // `open` of a Unix socket.
        #[cfg(unix)]
        Some(nix::libc::ENXIO) => not_regular("a socket"),
        _ => e,
    })?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    if kind.is_dir() {
        return Err(io::Error::new(ErrorKind::IsADirectory, "it is a directory, not a file"));
    }
    Err(not_regular(describe(kind)))
}

/// The whole of the regular file at `path`, if it holds at most `limit` bytes.
pub(crate) fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(too_large(limit));
    }
    read_stream(file, limit)
}

/// The last `max` bytes (or fewer) of the regular file at `path`.
pub(crate) fn read_tail(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut file = open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut tail = Vec::new();
    file.take(max).read_to_end(&mut tail)?;
    Ok(tail)
}

/// Everything `reader` gives until its end, if that is at most `limit` bytes: the check holds
/// however much the source says it has (a regular file can grow, a pipe has no size).
pub(crate) fn read_stream(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(would_block_is_an_error)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// `12 MiB`, `640 KiB`, `100 bytes`: a limit as the messages show it.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        ErrorKind::FileTooLarge,
        format!("it is over {}, more than loop-hook reads", human_bytes(limit)),
    )
}

fn not_regular(what: &str) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, format!("it is {what}, not a regular file"))
}

/// A descriptor opened without blocking that has nothing to give now (a special file that
/// claims to be regular, such as some under /proc) is not one to wait for.
fn would_block_is_an_error(e: io::Error) -> io::Error {
    if e.kind() == ErrorKind::WouldBlock { not_regular("a file that would block") } else { e }
}

#[cfg(unix)]
fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn describe(_kind: std::fs::FileType) -> &'static str {
    "a special file"
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Runs `f` on a thread and fails if it takes more than two seconds: the regression these
    /// tests guard against is a read that never returns.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) fn within_two_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        let result = rx.recv_timeout(Duration::from_secs(2)).expect("the read blocked");
        assert!(started.elapsed() < Duration::from_secs(2));
        result
    }

    #[cfg(unix)]
    pub(crate) fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn reads_a_regular_file_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read(&path, 10).unwrap(), b"0123456789");
        let err = read(&path, 9).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "it is over 9 bytes, more than loop-hook reads");
        assert_eq!(read_tail(&path, 4).unwrap(), b"6789");
        assert_eq!(read_tail(&path, 100).unwrap(), b"0123456789");
        assert_eq!(read(&dir.path().join("none"), 1).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(read(dir.path(), 1).unwrap_err().kind(), ErrorKind::IsADirectory);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let for_read = fifo.clone();
        let err = within_two_seconds(move || read(&for_read, 1 << 20).unwrap_err());
        assert_eq!(err.to_string(), "it is a FIFO, not a regular file");
        let err = within_two_seconds(move || read_tail(&fifo, 1 << 20).unwrap_err());
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_links_to_them_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("state.md");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for path in [Path::new("/dev/zero"), Path::new("/dev/urandom"), Path::new("/dev/null"), &link] {
            let path = path.to_path_buf();
            let err = within_two_seconds(move || read(&path, 1 << 30).unwrap_err());
            assert_eq!(err.to_string(), "it is a character device, not a regular file");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let err = within_two_seconds(move || read(&path, 1 << 20).unwrap_err());
        assert_eq!(err.to_string(), "it is a socket, not a regular file");
    }

    #[test]
    fn a_stream_is_cut_at_its_limit() {
        let endless = io::repeat(b'x');
        assert_eq!(read_stream(endless, 1 << 20).unwrap_err().kind(), ErrorKind::FileTooLarge);
        assert_eq!(read_stream(&b"abc"[..], 3).unwrap(), b"abc");
    }

    #[test]
    fn limits_read_as_people_write_them() {
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
