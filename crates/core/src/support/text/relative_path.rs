//! Paths relative to a project's directory, worked out without touching the disk.

use std::path::{Component, Path, Prefix};

/// `path` relative to `cwd` with `/` separators, if it is inside `cwd`. Purely lexical: `..`
/// components are resolved without touching the disk, so a deleted file still maps.
pub(crate) fn relative_to(cwd: &Path, path: &Path) -> Option<String> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    let mut parts: Vec<String> = Vec::new();
    let base: Vec<String> = normal_components(cwd)?;
    for component in normal_components(&absolute)? {
        parts.push(component);
    }
    if parts.len() <= base.len() || !parts.iter().zip(&base).all(|(part, base)| same_name(part, base)) {
        return None;
    }
    Some(parts[base.len()..].join("/"))
}

/// Whether two names of one folder's entries name the same entry: Windows folds case
/// (`CHECK.BAT` is `check.bat`), Unix does not.
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) { a.eq_ignore_ascii_case(b) } else { a == b }
}

fn normal_components(path: &Path) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            // The drive is part of where a file is (`D:\x` is not `C:\x`), however it is
            // spelt (`\\?\D:` is what canonicalizing gives).
            Component::Prefix(prefix) => out.push(match prefix.kind() {
                Prefix::Disk(drive) | Prefix::VerbatimDisk(drive) => {
                    format!("{}:", drive.to_ascii_uppercase() as char)
                }
                _ => prefix.as_os_str().to_string_lossy().into_owned(),
            }),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::Normal(part) => out.push(part.to_string_lossy().into_owned()),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_inside_maps_and_one_outside_does_not() {
        let cwd = Path::new(if cfg!(windows) { r"D:\proj\app" } else { "/proj/app" });
        assert_eq!(relative_to(cwd, &cwd.join("src").join("..").join("check.sh")), Some("check.sh".into()));
        assert_eq!(relative_to(cwd, Path::new("tests/a.rs")), Some("tests/a.rs".into()));
        assert_eq!(relative_to(cwd, &cwd.join("..").join("other")), None);
        assert_eq!(relative_to(cwd, cwd), None);
    }

    #[cfg(unix)]
    #[test]
    fn unix_names_differ_by_case() {
        assert_eq!(relative_to(Path::new("/proj/app"), Path::new("/PROJ/app/check.sh")), None);
    }

    #[cfg(windows)]
    #[test]
    fn windows_paths_match_in_any_case_and_spelling_of_their_drive_but_not_on_another_drive() {
        let cwd = Path::new(r"D:\Work\My App");
        assert_eq!(relative_to(cwd, Path::new(r"d:\WORK\my app\CHECK.BAT")), Some("CHECK.BAT".into()));
        assert_eq!(relative_to(cwd, Path::new(r"\\?\D:\Work\My App\tests\a.rs")), Some("tests/a.rs".into()));
        assert_eq!(relative_to(cwd, Path::new("D:/Work/My App/check.bat")), Some("check.bat".into()));
        assert_eq!(relative_to(cwd, Path::new(r"C:\Work\My App\check.bat")), None);
    }
}
