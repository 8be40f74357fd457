//! Names the commit and the build date in `tayga --version` (TAYGA_BUILD_COMMIT and
//! TAYGA_BUILD_DATE, read by `src/cli.rs`). Outside a git checkout (a source tarball, a
//! container build without `.git`) the commit is `unknown`.

use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = output("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|epoch| output("date", &["-u", "-d", &format!("@{epoch}"), "+%Y-%m-%d"]))
        .or_else(|| output("date", &["-u", "+%Y-%m-%d"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TAYGA_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=TAYGA_BUILD_DATE={date}");
    // Rebuild the version when HEAD moves (a commit, a checkout) — the branch's own ref only,
    // not every branch's, and only when it exists as a file (a missing path would rerun this
    // on every build).
    if let Some(dir) = output("git", &["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
    }
    if let (Some(common), Some(head)) =
        (output("git", &["rev-parse", "--git-common-dir"]), output("git", &["symbolic-ref", "-q", "HEAD"]))
    {
        let path = std::path::Path::new(&common).join(head);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-changed=build.rs");
}
