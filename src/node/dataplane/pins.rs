//! Where a Node's datapath lives on bpffs, and the links that keep its programs
//! attached when the daemon is gone.
//!
//! This module holds every path and name of a Node's pins, and the names of the maps
//! the daemon makes at run time (inner maps), so that nothing else spells one.
//!
//! Layout under the pin root ([`pin_dir_of`], `/sys/fs/bpf/juneau/<node>` by default):
//! `v<LAYOUT_VERSION>/maps/<map>` and `v<LAYOUT_VERSION>/links/<program>-<ifindex>`
//! (bpffs refuses dots in names: EPERM).
//! A TCX link pinned there stays attached after the process that made it exits (as
//! Cilium's agent keeps its programs through a restart); removing the pin detaches it.
//! Folders of another version belong to another layout and are never read as ours.
use std::path::{Path, PathBuf};

use juneau_common::LAYOUT_VERSION;

use super::DataplaneError;

/// Default pin root: `<this>/<node>`.
pub const PIN_BASE: &str = "/sys/fs/bpf/juneau";

/// Where `node`'s datapath pins its maps by default (`--pin-dir` overrides it); what
/// `kubectl-juneau --node` reads.
pub fn pin_dir_of(node: &str) -> PathBuf {
    Path::new(PIN_BASE).join(node)
}

/// The kernel's limit on a map's name (BPF_OBJ_NAME_LEN, less its NUL).
pub const MAP_NAME_MAX: usize = 15;

/// The learning table of the L2 segment `vni` (an inner map of `jn_l2_fdb`).
pub fn fdb_map_name(vni: u32) -> String {
    format!("jn_fdb_{vni}")
}

/// The routes of route-table slot `slot` (an inner map of the router's tables).
pub fn route_map_name(slot: u32) -> String {
    format!("jn_rt_{slot}")
}

/// The Maglev table of Service frontend `id`.
pub fn maglev_map_name(id: u32) -> String {
    format!("jn_mg_{id}")
}

/// The folders of one pin root.
#[derive(Clone, Debug)]
pub struct PinLayout {
    root: PathBuf,
}

/// The maps folder of a version folder (this build's or another's, found by
/// [`PinLayout::other_versions`]).
pub fn maps_dir_in(version_dir: &Path) -> PathBuf {
    version_dir.join("maps")
}

/// A pinned link found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedLinkFile {
    pub prog: String,
    pub ifindex: u32,
    pub path: PathBuf,
}

impl PinLayout {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
        }
    }

    /// `v<LAYOUT_VERSION>`: this build's folder.
    pub fn version_dir(&self) -> PathBuf {
        self.root.join(format!("v{LAYOUT_VERSION}"))
    }

    pub fn maps_dir(&self) -> PathBuf {
        maps_dir_in(&self.version_dir())
    }

    pub fn links_dir(&self) -> PathBuf {
        self.version_dir().join("links")
    }

    pub fn link_path(&self, prog: &str, ifindex: u32) -> PathBuf {
        self.links_dir().join(format!("{prog}-{ifindex}"))
    }

    /// Creates this version's folders (mounting bpffs when the machine has none).
    pub fn prepare(&self) -> Result<(), DataplaneError> {
        ensure_bpffs()?;
        for dir in [self.maps_dir(), self.links_dir()] {
            std::fs::create_dir_all(&dir)
                .map_err(|source| DataplaneError::PinDir { path: dir, source })?;
        }
        Ok(())
    }

    /// True when this version's maps were pinned before (a daemon ran here).
    pub fn has_maps(&self) -> bool {
        std::fs::read_dir(self.maps_dir()).is_ok_and(|mut d| d.next().is_some())
    }

    /// Pinned links of this version, by program and ifindex.
    pub fn links(&self) -> Vec<PinnedLinkFile> {
        let Ok(dir) = std::fs::read_dir(self.links_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<PinnedLinkFile> = dir
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (prog, ifindex) = name.rsplit_once('-')?;
                Some(PinnedLinkFile {
                    prog: prog.to_owned(),
                    ifindex: ifindex.parse().ok()?,
                    path: e.path(),
                })
            })
            .collect();
        out.sort_by_key(|l| l.ifindex);
        out
    }

    /// What other layouts left under the root: folders of other versions (older or
    /// newer daemons) and map pins of the first, unversioned layout (`<root>/jn_*`).
    pub fn other_versions(&self) -> Vec<PathBuf> {
        let ours = format!("v{LAYOUT_VERSION}");
        let Ok(dir) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let version = n
                    .strip_prefix('v')
                    .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
                (version && n != ours) || n.starts_with("jn_")
            })
            .map(|e| e.path())
            .collect()
    }
}

/// Removes a pin; a pin already gone is fine.
pub fn unpin(path: &Path) -> Result<(), DataplaneError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(DataplaneError::PinDir {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Removes a whole pin folder (maps and links of a dead layout): every link pinned in
/// it detaches, every map is freed once no program holds it.
pub fn remove_tree(path: &Path) -> Result<(), DataplaneError> {
    if path.is_file() {
        return unpin(path);
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(DataplaneError::PinDir {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Pinning needs a bpffs at /sys/fs/bpf; a fresh machine may not have it mounted.
pub fn ensure_bpffs() -> Result<(), DataplaneError> {
    let root = Path::new("/sys/fs/bpf");
    let mounted = std::fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf") && l.contains(" bpf "))
        })
        .unwrap_or(false);
    if !mounted {
        nix::mount::mount(
            Some("bpf"),
            root,
            Some("bpf"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| DataplaneError::PinDir {
            path: root.to_owned(),
            source: e.into(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_pins_are_under_its_own_folder_of_this_layout_version() {
        let l = PinLayout::new(&pin_dir_of("n1"));
        assert_eq!(
            l.maps_dir(),
            Path::new(&format!("/sys/fs/bpf/juneau/n1/v{LAYOUT_VERSION}/maps"))
        );
        assert_eq!(maps_dir_in(&l.version_dir()), l.maps_dir());
        assert_eq!(
            l.links_dir(),
            Path::new(&format!("/sys/fs/bpf/juneau/n1/v{LAYOUT_VERSION}/links"))
        );
    }

    #[test]
    fn inner_map_names_fit_the_kernels_limit_at_their_largest() {
        // VNIs are 24 bits; slots and frontend ids are u32 (their maps hold fewer, the
        // name must still fit whatever a writer asks for).
        let largest = [
            fdb_map_name(0xff_ffff),
            route_map_name(u32::MAX),
            maglev_map_name(u32::MAX),
        ];
        for n in &largest {
            assert!(n.starts_with("jn_"), "{n}: every map is prefixed");
        }
        assert!(largest[0].len() <= MAP_NAME_MAX, "{}", largest[0]);
        assert_eq!(fdb_map_name(7), "jn_fdb_7");
        assert_eq!(route_map_name(3), "jn_rt_3");
        assert_eq!(maglev_map_name(12), "jn_mg_12");
    }

    #[test]
    fn link_pins_are_named_by_program_and_ifindex_under_the_version_folder() {
        let l = PinLayout::new(Path::new("/sys/fs/bpf/juneau/n1"));
        let p = l.link_path("port_ingress", 42);
        assert_eq!(
            p,
            Path::new(&format!(
                "/sys/fs/bpf/juneau/n1/v{LAYOUT_VERSION}/links/port_ingress-42"
            ))
        );
    }
}
