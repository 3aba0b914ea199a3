#!/bin/bash
# Checks that a change to the reader leaves its reports byte-identical: builds oomtrace-read at two commits
# (git worktrees under $TMPDIR) and reads every snapshot under the given folders with both, as text, JSON
# and every other format, then compares stdout, stderr and exit status.
#   bash tests/gpu/reader_same.sh BASE_COMMIT NEW_COMMIT SNAPSHOT_DIR...
# e.g. one commit against its parent, on a GPU run's snapshots: bash tests/gpu/reader_same.sh C~1 C gpu-out
# Prints one line per snapshot and format that differs, then "N reads, M differ"; exit 1 when any differ.
set -u
[ $# -ge 3 ] || { echo "usage: $0 BASE_COMMIT NEW_COMMIT SNAPSHOT_DIR..." >&2; exit 2; }
base=$1 new=$2
shift 2
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/reader-same-XXXXXX")
trap 'git -C "$root" worktree remove --force "$tmp/base" 2>/dev/null; git -C "$root" worktree remove --force "$tmp/new" 2>/dev/null; rm -rf "$tmp"' EXIT
for side in base new; do
    rev=${!side}
    git -C "$root" worktree add --detach "$tmp/$side" "$rev" >/dev/null 2>&1 || { echo "cannot check out $rev" >&2; exit 2; }
    make -C "$tmp/$side" -j"$(nproc)" build/oomtrace-read >/dev/null 2>&1 || { echo "cannot build the reader at $rev" >&2; exit 2; }
done
n=0 bad=0
while IFS= read -r -d '' f; do
    for fmt in text json markdown html folded memviz; do
        n=$((n + 1))
        for side in base new; do
            "$tmp/$side/build/oomtrace-read" --no-symbolize --format "$fmt" "$f" >"$tmp/$side.out" 2>"$tmp/$side.err"
            echo $? >"$tmp/$side.rc"
        done
        if ! cmp -s "$tmp/base.out" "$tmp/new.out" || ! cmp -s "$tmp/base.err" "$tmp/new.err" ||
            ! cmp -s "$tmp/base.rc" "$tmp/new.rc"; then
            echo "differs: $fmt $f"
            bad=$((bad + 1))
        fi
    done
done < <(find "$@" -type f -name '*.oomt' -print0 | sort -z)
echo "$n reads, $bad differ"
[ "$bad" -eq 0 ]
