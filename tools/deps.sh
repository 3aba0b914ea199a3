#!/bin/sh
# Checks (--check) or installs (--install) the Debian packages that building and testing oomtrace needs.
# --check installs them too when run as root with apt-get available; otherwise it prints the command.
set -u
PKGS="build-essential pkg-config libunwind-dev libzstd-dev libdw-dev libelf-dev libcmocka-dev python3 zstd chromium"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
cmd="apt-get update && apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing missing packages:$missing" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing) >&2 \
        || { echo "oomtrace: package install failed; run: $cmd" >&2; exit 1; }
    exit 0
fi
echo "oomtrace: missing packages:$missing. Run as root: $cmd" >&2
exit 1
