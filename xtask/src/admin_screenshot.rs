//! Regenerates docs/admin-page.png, the picture of the admin page in docs/admin.md: runs the
//! stack test (which drives headless Chromium through the page and saves screenshots under
//! target/browser/) and copies the overview it took. Needs what `bash .ci/run` installs; on
//! a machine without a registry, set BOOKMARKS_STACK_OFFLINE=1 and build the stand-in images.

use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::process::{self, output};

pub async fn run() -> crate::Outcome {
    output(&mut process::command("scripts/install-browser.sh")).await?;
    let status = process::command(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--locked", "--test", "stack"])
        .status()
        .await?;
    if !status.success() {
        bail!("the stack test failed: no new screenshot");
    }
    let shot = process::target_dir().join("browser/admin.png");
    std::fs::copy(&shot, process::root().join("docs/admin-page.png"))
        .with_context(|| format!("copying {}", shot.display()))?;
    println!("docs/admin-page.png updated");
    Ok(ExitCode::SUCCESS)
}
