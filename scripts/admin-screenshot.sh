#!/usr/bin/env bash
# Regenerates docs/admin-page.png, the picture of the admin page in docs/admin.md: runs the stack
# test (which drives headless Chromium through the page and saves screenshots under
# target/browser/) and copies the overview it took. Needs what `bash .ci/run` installs;
# on a machine without a registry, set BOOKMARKS_STACK_OFFLINE=1 and the stand-in images.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-browser.sh
cargo test --test stack
cp target/browser/admin.png docs/admin-page.png
echo "admin-screenshot: docs/admin-page.png updated"
