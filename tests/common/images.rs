//! The images a testbed Node runs (no registry can be reached here): OCI image layout
//! archives built in the test, `ctr images import`ed by each containerd.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{BUSYBOX, PAUSE, run};

fn sha256(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}

/// Writes an OCI image layout archive at `out`: one layer holding `files` (path in the
/// image, file on this machine), `cmd` as its command, `name` as its reference.
pub fn oci_image(out: &Path, name: &str, files: &[(&str, &Path)], cmd: &[&str]) {
    oci_image_linked(out, name, files, &[], cmd)
}

/// [`oci_image`] with symbolic links too (path in the image, target), and a `PATH`.
pub fn oci_image_linked(
    out: &Path,
    name: &str,
    files: &[(&str, &Path)],
    links: &[(&str, &str)],
    cmd: &[&str],
) {
    let work = out.with_extension("d");
    let rootfs = work.join("rootfs");
    let blobs = work.join("layout/blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    for (inside, from) in files {
        let to = rootfs.join(inside);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    for (inside, target) in links {
        let at = rootfs.join(inside);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &at).unwrap();
    }
    let layer = work.join("layer.tar");
    run(Command::new("tar")
        .args(["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-cf"])
        .arg(&layer)
        .arg("-C")
        .arg(&rootfs)
        .arg("."));
    // A blob is stored under its digest; returns (digest, size).
    let store = |path: &Path| -> (String, u64) {
        let digest = sha256(path);
        std::fs::copy(path, blobs.join(&digest)).unwrap();
        (
            format!("sha256:{digest}"),
            std::fs::metadata(path).unwrap().len(),
        )
    };
    let (layer_digest, layer_size) = store(&layer);
    let json = |file: &str, v: serde_json::Value| -> (String, u64) {
        let p = work.join(file);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        store(&p)
    };
    let (config_digest, config_size) = json(
        "config.json",
        serde_json::json!({
            "architecture": "amd64", "os": "linux", "config": {"Cmd": cmd,
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }),
    );
    let (manifest_digest, manifest_size) = json(
        "manifest.json",
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": layer_digest, "size": layer_size}],
        }),
    );
    let layout = work.join("layout");
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest, "size": manifest_size,
                // containerd names an imported image by this annotation.
                "annotations": {"io.containerd.image.name": name},
            }],
        }))
        .unwrap(),
    )
    .unwrap();
    run(Command::new("tar")
        .args(["--sort=name", "--mtime=@0", "-cf"])
        .arg(out)
        .arg("-C")
        .arg(&layout)
        .arg("."));
    std::fs::remove_dir_all(&work).unwrap();
}

/// The pause and busybox images in `dir` (pause.tar, busybox.tar): a pause built here
/// with `gcc -static`, Debian's static busybox.
pub fn test_images(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let src = dir.join("pause.c");
    std::fs::write(
        &src,
        "#include <signal.h>\n#include <unistd.h>\nstatic void bye(int s){(void)s;_exit(0);}\n\
         int main(void){signal(SIGINT,bye);signal(SIGTERM,bye);for(;;)pause();}\n",
    )
    .unwrap();
    let pause = dir.join("pause");
    run(Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&pause)
        .arg(&src));
    let busybox = Path::new("/bin/busybox");
    assert!(
        run(Command::new("file").arg("-L").arg(busybox))
            .stdout
            .windows(15)
            .any(|w| w == b"statically link"),
        "/bin/busybox must be Debian's busybox-static (cargo xtask test installs it)"
    );
    let (p, b) = (dir.join("pause.tar"), dir.join("busybox.tar"));
    oci_image(&p, PAUSE, &[("pause", &pause)], &["/pause"]);
    oci_image(
        &b,
        BUSYBOX,
        &[("bin/busybox", busybox)],
        &["/bin/busybox", "sleep", "3600"],
    );
    (p, b)
}
