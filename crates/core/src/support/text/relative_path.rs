//! Paths relative to a project's directory, worked out without touching the disk.

use std::path::{Component, Path};

/// `path` relative to `cwd` with `/` separators, if it is inside `cwd`. Purely lexical: `..`
/// components are resolved without touching the disk, so a deleted file still maps.
pub(crate) fn relative_to(cwd: &Path, path: &Path) -> Option<String> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    let mut parts: Vec<String> = Vec::new();
    let base: Vec<String> = normal_components(cwd)?;
    for component in normal_components(&absolute)? {
        parts.push(component);
    }
    if parts.len() <= base.len() || parts[..base.len()] != base[..] {
        return None;
    }
    Some(parts[base.len()..].join("/"))
}

fn normal_components(path: &Path) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::Normal(part) => out.push(part.to_string_lossy().into_owned()),
        }
    }
    Some(out)
}
