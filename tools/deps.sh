#!/bin/sh
# The Debian packages oomtrace needs.
#   deps.sh --check    building: install what is missing when root with apt-get, else print the command
#   deps.sh --install  the same
#   deps.sh --test     building and testing: also Chromium (HTML screenshot test) and clang with its
#                      runtime (libFuzzer, sanitizers), python3-torch (the companion against real objects), and
#                      strace (the tests that count the tracer's process_vm_readv calls)
set -u
BUILD_PKGS="build-essential pkg-config libunwind-dev libzstd-dev libdw-dev libelf-dev liblzma-dev zlib1g-dev libbz2-dev python3 zstd"
TEST_PKGS="libcmocka-dev chromium clang libclang-rt-14-dev python3-torch strace"
case "${1:---check}" in
--test) PKGS="$BUILD_PKGS $TEST_PKGS" ;;
*) PKGS="$BUILD_PKGS libcmocka-dev" ;;
esac
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
