//! Gathering the facts: the machine's and the project's, and each host's installation, which its
//! adapter reads and judges ([`crate::host::install`]); [`super::lines`] judges the rest.

mod project;

use super::facts::Facts;
use crate::host::Host;
use crate::host::{
    Look,
    install::{binary_facts, on_path},
};
use crate::store::Store;
use crate::support::Environment;
use crate::worktree::WorkTree;

/// Everything the checks need about this machine and the project in `env.cwd`. A host's facts
/// are gathered when `asked` names it, or when the host looks installed here (its program on
/// `PATH` or its configuration directory present).
pub(crate) fn gather(env: &Environment, asked: Option<Host>) -> Facts {
    let tree = WorkTree::open(&env.cwd);
    let project = if tree.is_git() { tree.root().to_path_buf() } else { env.cwd.clone() };
    let store = Store::locate(env).ok();
    let found = |host: Host| {
        on_path(env, host.program()).is_some() || host.install_home(env).is_some_and(|d| d.is_dir())
    };
    let hosts_found: Vec<Host> = Host::ALL.iter().copied().filter(|host| found(*host)).collect();
    let binary = binary_facts(env);
    let hosts = Host::ALL
        .iter()
        .copied()
        .filter(|host| asked.is_none_or(|asked| asked == *host))
        .filter_map(|host| {
            let look = Look {
                env,
                project: &project,
                binary: &binary,
                asked: asked == Some(host),
                present: asked == Some(host) || hosts_found.contains(&host),
            };
            host.check_install(&look).map(|installation| (host, installation))
        })
        .collect();
    Facts {
        hosts_found,
        binary,
        store: project::store(store.as_ref()),
        hosts,
        tier: project::tier(env, &project, store.as_ref()),
        loops: project::loops(env, &project, store.as_ref()),
        asked,
        containment: Some(crate::checks::Containment::probed()),
        project,
    }
}
