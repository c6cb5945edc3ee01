#!/usr/bin/env bash
# Installs what the stack test's browser checks need: headless Chromium and its WebDriver,
# from the machine's own Debian package sources. Does nothing when both are present.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "install-browser: $(chromium --version 2>/dev/null | head -1), chromedriver present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
echo "install-browser: $(chromium --version 2>/dev/null | head -1) installed"
