# oomtrace-report.sh: the launcher's after-run part, sourced by tools/oomtrace (installed beside it: bin/ of the
# wheel, lib/oomtrace/ of make install) once CMD has ended (--after-run). It picks the snapshot to report, says why
# there is none, runs the gate over the run's directory and writes the --summary. It uses the launcher's me, here,
# reader and read_with_gate, and the run's variables that --after-run sets.

# How many processes wrote the snapshots listed in $1 (one path per line; names carry the PID). A
# crash-surviving file, ...-PID[-rankR]-rRUN-flush.oomt, is named by its run id where the others have a
# sequence number.
# "1 snapshot", "2 snapshots": a count and its noun.
counted() {
    if [ "$1" = 1 ]; then printf '1 %s' "$2"; else printf '%s %s' "$1" "$3"; fi
}

count_processes() {
    printf '%s\n' "$1" | sed -e 's/-r[0-9a-f]*-flush\.oomt$/-0-flush.oomt/' \
        -e 's/.*oomtrace-.*-\([0-9][0-9]*\)\(-rank[0-9]*\)\{0,1\}-[0-9][0-9]*-[a-z-]*\(\.[0-9]*\)\{0,1\}\.oomt$/\1/' |
        sort -u | wc -l
}

# The process id in a snapshot's name, oomtrace-HOST-PID[-rankR]-N-TRIGGER[.K].oomt (or -rRUN-flush.oomt).
snapshot_pid() {
    printf '%s\n' "${1##*/}" | sed 's/^oomtrace-.*-\([0-9][0-9]*\)\(-rank[0-9]*\)\{0,1\}-\(r[0-9a-f]*\|[0-9][0-9]*\)-[a-z-]*\(\.[0-9]*\)\{0,1\}\.oomt$/\1/'
}

# The sequence number N of a snapshot named ...-N-TRIGGER[.K].oomt.
snapshot_seq() {
    printf '%s\n' "$1" | sed 's/.*-\([0-9][0-9]*\)-[a-z-]*\(\.[0-9]*\)\{0,1\}\.oomt$/\1/'
}

# The paths on standard input (one per line) in the order their process wrote them: by the sequence number N
# of ...-N-TRIGGER[.K].oomt, since the names' own order puts -10- before -9-; a crash-surviving file (named by
# its run id, not by a number) last, as the latest state.
by_seq() {
    sed -e '/^$/d' -e 's/^.*-flush\.oomt$/999999999 &/;t' -e 's/^.*-\([0-9][0-9]*\)-[a-z-]*\(\.[0-9]*\)\{0,1\}\.oomt$/\1 &/;t' \
        -e 's/^/0 /' | sort -n -k1,1 | sed 's/^[0-9]* //'
}

# Which snapshot of this run the report shows: the run's directory (the merged view) when several processes
# wrote snapshots, else the process's first framework out-of-memory snapshot (the fatal one: the driver-level
# ones before it were the framework's retries and probes, which it survived; the count is said), else its
# first out-of-memory snapshot, else its last one. $1: the run's directory; $2: the run's snapshots, one per
# line, in the order they were written (by_seq). Sets target (the path) and note (a line said before the
# report, and in the summary; empty for none). grep -a: a run directory whose name is not text in the locale
# (Latin-1 on an old NFS home) must not make grep print "binary file matches" instead of the names.
choose_report() {
    note=""
    if [ "$(count_processes "$2")" -gt 1 ]; then
        target=$1
        return
    fi
    fatal=""
    # Here-documents, not $(...) word lists: the run's directory may hold spaces.
    while IFS= read -r f; do
        [ -n "$f" ] || continue
        if [ -z "$fatal" ] || [ "$(snapshot_seq "$f")" -lt "$(snapshot_seq "$fatal")" ]; then fatal=$f; fi
    done <<EOF
$(printf '%s\n' "$2" | grep -a -- '-framework-oom\(\.[0-9]*\)\{0,1\}\.oomt$')
EOF
    if [ -n "$fatal" ]; then
        fseq=$(snapshot_seq "$fatal")
        probes=0
        while IFS= read -r f; do
            [ -n "$f" ] && [ "$(snapshot_seq "$f")" -lt "$fseq" ] && probes=$((probes + 1))
        done <<EOF
$(printf '%s\n' "$2" | grep -a -- '-[0-9][0-9]*-oom\(\.[0-9]*\)\{0,1\}\.oomt$')
EOF
        if [ "$probes" -eq 1 ]; then were="snapshot before it was"; else were="snapshots before it were"; fi
        note="the framework's out-of-memory (the fatal one) is reported; $probes driver-level $were the framework's retries and probes"
        target=$fatal
        return
    fi
    ooms=$(printf '%s\n' "$2" | grep -a -- '-[0-9][0-9]*-oom\(\.[0-9]*\)\{0,1\}\.oomt$')
    first_oom=$(printf '%s\n' "$ooms" | head -1)
    if [ -n "$first_oom" ]; then
        target=$first_oom
        # What became of the process after its failure is said for CMD's own process only, whose status that is (a
        # program that a script ran has a status of its own).
        [ "$(snapshot_pid "$first_oom")" = "$cmdpid" ] || return
        n=$(printf '%s\n' "$ooms" | grep -c .)
        last_oom=$(printf '%s\n' "$ooms" | tail -1)
        if [ "$n" -eq 1 ]; then failures="its out-of-memory"; else failures="the first of its $n out-of-memory failures"; fi
        exit_snap=$(printf '%s\n' "$2" | grep -a -- '-[0-9][0-9]*-exit\(\.[0-9]*\)\{0,1\}\.oomt$' | tail -1)
        if [ -n "$exit_snap" ] && [ "$(snapshot_seq "$exit_snap")" -lt "$(snapshot_seq "$first_oom")" ]; then
            # The exit snapshot is written when exit() begins; atexit handlers and static destructors that run
            # after it (a final checkpoint, a library's teardown) failed, not the program's main part.
            note="the process's out-of-memory failures came after its exit snapshot (${exit_snap##*/}), in its exit handlers (atexit, static destructors)"
        elif [ "$sig" -ne 0 ] || { [ "$rc" -ne 0 ] && [ -z "$exit_snap" ]; }; then
            # Killed (an uncaught C++ exception aborts; the kernel's OOM killer; a crash) after its failures: the
            # last one is where it was when it died, the one that killed it when there were several.
            if [ "$sig" -ne 0 ]; then how="was killed by SIG$(kill -l "$sig")"; else how="ended with status $rc without an exit snapshot"; fi
            case $sig in
            6) how="$how (an uncaught C++ exception, or abort())" ;;
            9) how="$how (the kernel's out-of-memory killer sends it: see dmesg)" ;;
            esac
            if [ "$n" -eq 1 ]; then
                note="the process $how after its out-of-memory; the report below is of that failure"
            else
                note="the process went on after $failures and $how; the report below is of its last, ${last_oom##*/}, the one it died of"
                target=$last_oom
            fi
        elif [ -n "$exit_snap" ] && [ "$rc" -eq 0 ]; then
            # A process that caught the failure (a batch-size search, a retry with less) went on and succeeded:
            # said, so that the report of its first failure is not read as how it ended. An uncaught out-of-memory
            # error also reaches the exit snapshot (Python exits through its handlers), with a failed status.
            note="the process went on after $failures and exited 0 (its exit snapshot: ${exit_snap##*/}); the report below is of the first failure"
        elif [ -n "$exit_snap" ] && [ "$n" -gt 1 ]; then
            note="the process went on after $failures and exited with status $rc (its exit snapshot: ${exit_snap##*/}); the report below is of its last, ${last_oom##*/}"
            target=$last_oom
        fi
    else
        target=$(printf '%s\n' "$2" | tail -1)
        # A crash-surviving file of CMD's own process, which the launcher saw killed: said, since the file alone
        # cannot tell a kill from a process still running.
        case $target in *-flush.oomt)
            if [ "$sig" -ne 0 ] && [ "$(snapshot_pid "$target")" = "$cmdpid" ]; then
                note="$cmd was killed by SIG$(kill -l "$sig")"
                [ "$sig" -eq 9 ] && note="$note (the kernel's out-of-memory killer sends it: see dmesg)"
                note="$note; the report below is its last flush"
            fi ;;
        esac
    fi
}

# Why CMD left no snapshot, from what is known of the run: "allocated no GPU memory" only when nothing else
# explains it (a process killed by a signal never reaches its exit snapshot).
why_no_snapshot() {
    case ",$dump," in *,none,*) echo "OOMTRACE_DUMP=none is set, which turns them off"; return ;; esac
    # OOMTRACE_DISABLE as the library reads it (lib/common/options.c): 1, yes, true, on, any case.
    case $(printf '%s' "${OOMTRACE_DISABLE:-0}" | tr '[:upper:]' '[:lower:]') in
    1 | yes | true | on) echo "OOMTRACE_DISABLE=$OOMTRACE_DISABLE is set, so nothing was traced"; return ;;
    esac
    # A full file system: the library said "cannot write snapshot ...: No space left on device" above, and
    # the command did allocate. Less than a few KiB left is no room for a snapshot.
    avail=$(df -Pk -- "${rundir%/*}" 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [ -n "$avail" ] && [ "$avail" -lt 64 ] 2>/dev/null; then
        echo "the file system of ${rundir%/*} is full ($avail KiB free), so the library could not write them (its lines above say so); --dir or OOMTRACE_DIR picks another"
        return
    fi
    case ",$dump," in *,crash,*) crash=yes ;; *) crash="" ;; esac
    # The user's own verify_asan_link_order (kept as set): a program built with AddressSanitizer then exits 1 at
    # start under any preload, having said "ASan runtime does not come first" above.
    case ":${ASAN_OPTIONS-}:" in *[:\ ,]verify_asan_link_order=0[:\ ,]*) ;; *[:\ ,]verify_asan_link_order=*)
        if [ "$rc" -ne 0 ]; then
            echo "$cmd exited with status $rc: ASAN_OPTIONS sets verify_asan_link_order, with which a program built with AddressSanitizer refuses to start under a preload (its line above); leave that option out, and the launcher turns the check off"
            return
        fi ;;
    esac
    # No process allocated with the library loaded (none left a note): the command allocated nothing, or what
    # allocated ran without LD_PRELOAD, which a command that clears the environment drops.
    if [ "$used" -eq 0 ]; then
        case ${cmd##*/} in
        env | sudo | su | doas | runuser | setpriv | pkexec | docker | podman | nerdctl | singularity | apptainer | systemd-run | ssh)
            drops="or $cmd cleared the environment for what it ran, LD_PRELOAD with it, as env -i, sudo and docker run do: run oomtrace inside it (sudo oomtrace run -- CMD)" ;;
        *)
            if [ -u "$(command -v -- "$cmd")" ] || [ -g "$(command -v -- "$cmd")" ]; then
                drops="or it ran untraced: $cmd is a setuid or setgid program, which the loader runs without LD_PRELOAD"
            else
                drops="or what allocated ran untraced: a command that clears the environment (env -i, sudo, docker run) or a setuid program drops LD_PRELOAD; run oomtrace inside it"
            fi ;;
        esac
        [ "$sig" -ne 0 ] && [ -z "$crash" ] && drops="$drops; or $cmd was killed by SIG$(kill -l "$sig") before it allocated"
        echo "no process of the command allocated GPU memory with the library loaded: it allocated none, $drops"
        return
    fi
    if [ "$sig" -ne 0 ] && [ -z "$crash" ]; then
        echo "$cmd was killed by SIG$(kill -l "$sig") before its exit snapshot; OOMTRACE_DUMP=crash keeps one for a crashing process"
    elif [ "$sig" -eq 0 ] && [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ] && [ -z "$crash" ] && name=$(kill -l "$((rc - 128))" 2>/dev/null); then
        echo "$cmd exited with status $rc, as a shell does for a command killed by SIG$name; OOMTRACE_DUMP=crash keeps a snapshot of a crashing process"
    else
        # A process that ends by _exit (os._exit: multiprocessing's forked workers, harnesses that skip
        # teardown) runs no exit handlers, and one killed by a signal (multiprocessing's Pool terminates its
        # workers with SIGTERM, as torchrun's agent does the other ranks) none either: neither writes an exit
        # snapshot though it allocated, and left its note.
        if [ "$used" -eq 1 ]; then who="the process of the command that allocated GPU memory"; else who="the $used processes of the command that allocated GPU memory"; fi
        echo "$who ended without an exit snapshot: by _exit or os._exit (no exit handlers run), or killed by a signal (SIGTERM from multiprocessing's Pool or a supervisor); OOMTRACE_DUMP=crash keeps a snapshot of such a process"
    fi
}

# The lines of $1 (directories) as one phrase: "A", "A and B", "A, B and C".
join_and() {
    printf '%s\n' "$1" | sed '/^$/d' | awk '{ v[NR] = $0 } END { for (i = 1; i <= NR; i++) printf "%s%s", (i == 1 ? "" : i == NR ? " and " : ", "), v[i]; print "" }'
}

# The gate's lines (on standard input) for the markdown summary: each gate's verdict in bold, then its numbers
# as the stderr line gives them, one paragraph each.
summary_gate_lines() {
    sed -e 's/^[^:]*: \(gate --[a-z-]* [a-z]*\): /**\1:** /' -e 's/$/\n/'
}

# After CMD ended: removes what dead processes left half-written, says in one line why there is no report, or
# prints the report and applies the gate. Uses rundir, peak, baseline, growth, cmd, dump, summary, rc (CMD's
# status), sig (the signal that ended it, 0 when it exited), passed (the last signal passed on to it, 0: none).
report_run() {
    gate=""
    [ -n "$peak$baseline" ] && gate=yes
    # Says in one line why there is no report; a gate that could not be checked fails (status 1: a gate never
    # passes for want of a peak, e.g. a command that was not traced), keeping a failed command's own status.
    gate_unchecked() {
        line="$me: $1"
        [ -n "$gate" ] && line="$line; the gate could not be checked, so it fails"
        # unless-unsaid: a report that failed because it could not be shown (standard error a pipe whose reader
        # has gone, CMD 2>&1 | head -1, where this line cannot go either) is no unchecked gate: the gate reads
        # the snapshots itself below.
        echo "$line" >&2 2>/dev/null || { [ "${2:-}" = unless-unsaid ] && return; }
        # The red job's summary page says why it is red, not nothing.
        if [ -n "$summary" ]; then
            printf '\n`%s run`: %s\n' "$me" "${line#"$me": }" >>"$summary" 2>/dev/null ||
                echo "$me: the summary could not be appended to $summary" >&2
        fi
        [ -n "$gate" ] && [ "$rc" -eq 0 ] && exit 1
        exit "$rc"
    }

    # A snapshot is written under a hidden temporary name and renamed once whole: one left behind was cut off by
    # its process's death (SIGKILL, a file size limit) and never reads as a snapshot. Those of this host's
    # processes that are gone are removed, and counted on stderr; a live process's may still be written.
    host=$(hostname 2>/dev/null | tr '/ ' '__')
    cut=0
    for f in "$rundir"/.oomtrace-"$host"-*.oomt.tmp-r*; do
        [ -f "$f" ] || continue
        pid=${f##*/.oomtrace-"$host"-}
        pid=${pid%%[!0-9]*}
        [ -n "$pid" ] || continue
        kill -0 "$pid" 2>/dev/null && continue
        rm -f -- "$f" && cut=$((cut + 1))
    done
    [ "$cut" -gt 0 ] &&
        echo "== oomtrace: $(counted "$cut" snapshot snapshots) cut off while being written (the process died); $([ "$cut" = 1 ] && echo "its unfinished file is" || echo "their unfinished files are") removed" >&2

    # Processes of the run still running (CMD started them in the background: a server, a worker that outlived
    # its shell): their environment names this run's directory, and their snapshots will still go there, so
    # neither it nor the library's link is removed.
    running=$(grep -lzxF "OOMTRACE_DIR=$rundir" /proc/[0-9]*/environ 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' |
        while read -r p; do [ "$p" != "$$" ] && grep -q '^State:[^Z]*$' "/proc/$p/status" 2>/dev/null && echo "$p"; done | paste -sd' ' -)
    [ -n "$linkdir" ] && [ -z "$running" ] && rm -rf -- "$linkdir"
    # The library's notes (runtime/init.c), one per process that used the device: the directory its snapshots go
    # to. A command that set its own OOMTRACE_DIR (or unset it: the process's own directory) wrote elsewhere:
    # those of this run are linked into the run's directory, and read with it: the files there from the second
    # before the process's note on (file times are coarser than the time between the note and a snapshot).
    used=0
    linked=0
    elsewhere=""
    for note in "$rundir"/.oomtrace-used-*; do
        [ -f "$note" ] || continue
        used=$((used + 1))
        d=$(cat -- "$note" 2>/dev/null)
        if [ -n "$d" ] && [ "$d" != "$rundir" ] && [ -d "$d" ]; then
            since=$(($(stat -c %Y -- "$note") - 1))
            n=$(find "$d" -maxdepth 1 -name 'oomtrace-*.oomt' -newermt "@$since" 2>/dev/null | while IFS= read -r f; do
                # Counted when linked here: a second process's note finds the first's files too, linked already.
                if [ ! -e "$rundir/${f##*/}" ]; then ln -s -- "$f" "$rundir/${f##*/}" && echo x; fi; done | grep -c x)
            [ "$n" -gt 0 ] && linked=$((linked + n)) && elsewhere=$(printf '%s\n%s' "$elsewhere" "$d" | sed '/^$/d' | sort -u)
        fi
        rm -f -- "$note"
    done
    [ "$linked" -gt 0 ] &&
        echo "== oomtrace: the command's processes wrote $(counted "$linked" snapshot snapshots) into $(join_and "$elsewhere"), not the run's directory (the command set its own OOMTRACE_DIR, or unset it): linked into the run's directory, and read with it" >&2
    snaps=$(find "$rundir" -maxdepth 1 -name 'oomtrace-*.oomt' 2>/dev/null | by_seq)
    nsnap=$(printf '%s\n' "$snaps" | grep -ac . || true)
    [ -n "$running" ] &&
        case $running in
        *" "*) echo "== oomtrace: processes of the run still running (pids $running): their snapshots will go to $rundir" >&2 ;;
        *) echo "== oomtrace: a process of the run still running (pid $running): its snapshots will go to $rundir" >&2 ;;
        esac
    [ -n "$reader" ] || gate_unchecked "oomtrace-read not found beside $here; $(counted "$nsnap" snapshot snapshots) in $rundir"
    # An oomtrace run inside CMD (a script that uses the launcher itself, once or more) left a note of its own
    # run's directory here: those snapshots are this run's too, and the gate reads them with this directory's.
    # One that wrote none removed its directory.
    inner=$(cat -- "$rundir"/.oomtrace-inner-run-* 2>/dev/null | while IFS= read -r d; do [ -d "$d" ] && printf '%s\n' "$d"; done)
    rm -f -- "$rundir"/.oomtrace-inner-run-*
    ninner=$(printf '%s\n' "$inner" | grep -ac . || true)
    if [ "$ninner" -eq 1 ]; then runs="an inner oomtrace run"; else runs="$ninner inner oomtrace runs"; fi
    if [ "$nsnap" -eq 0 ]; then # an empty run directory says nothing: it is removed
        where=""
        case $running in
        "") ;;
        *" "*) gate_unchecked "no snapshot was written yet: the run's processes still running (pids $running) may write theirs into $rundir" ;;
        *) gate_unchecked "no snapshot was written yet: a process of the run still running (pid $running) may write its own into $rundir" ;;
        esac
        rmdir -- "$rundir" 2>/dev/null || where=" in $rundir"
        [ "$ninner" -gt 0 ] && [ -z "$gate" ] &&
            gate_unchecked "no snapshot was written$where: $runs wrote them, into $(join_and "$inner")"
        [ "$ninner" -gt 0 ] || gate_unchecked "no snapshot was written$where: $(why_no_snapshot)"
        echo "== oomtrace: the snapshots were written by $runs, into $(join_and "$inner") (the reports above); the gate reads them there" >&2
    else
        choose_report "$rundir" "$snaps"
        [ -n "$note" ] && echo "== oomtrace: $note" >&2
        echo "== oomtrace: $(counted "$nsnap" snapshot snapshots) from $(counted "$(count_processes "$snaps")" process processes) in $rundir" >&2
        # The report goes to stderr with the launcher's other lines: the command's stdout may be its data.
        "$reader" --top 5 --frames 6 "$target" >&2
        [ $? -eq 2 ] && gate_unchecked "the report of $target could not be made (oomtrace-read's line above says why)" unless-unsaid
        [ "$ninner" -gt 0 ] &&
            echo "== oomtrace: $runs inside the command wrote snapshots too, into $(join_and "$inner") (the reports above); the gate reads them with these" >&2
    fi
    # The gate measures what `oomtrace-read --max-peak DIR` measures, each process's largest peak over all its
    # snapshots, never the one the report shows: a process that recovered from an out-of-memory (a batch-size
    # search) went higher after it. It reads this run's directory and every inner run's: a gate passes only when
    # each passes. Numbers only, so without symbols; the report of a directory is not shown.
    grc=0
    gates=""
    if [ -n "$gate" ]; then
        dirs=$inner
        [ "$nsnap" -gt 0 ] && dirs=$(printf '%s\n%s' "$rundir" "$inner")
        while IFS= read -r d; do
            [ -n "$d" ] || continue
            out=$(read_with_gate --no-symbolize -o /dev/null "$d" 2>&1)
            r=$?
            [ -n "$out" ] && printf '%s\n' "$out" >&2
            gates=$(printf '%s%s%s' "$gates" "${gates:+
}" "$out")
            [ "$r" -eq 2 ] && gate_unchecked "the gate could not be checked on the snapshots in $d (oomtrace-read's line above says why)"
            [ "$r" -eq 1 ] && grc=1
        done <<EOF
$dirs
EOF
        # A failed gate names the snapshot it measured; when that is not the one reported above, what held its
        # peak is shown too, so that a red CI log says what made the number: its call sites at the peak, not
        # its whole report, whose Why and What to try would stand beside the reported one's (a driver-level
        # snapshot's, without the allocator's view, against the framework's). A process's later snapshots
        # carry its high-water mark, so the reported one often holds the same peak: then nothing more is said.
        gate_peak() { # the "peak ... (N bytes) on device D" of a gate's line
            sed -n 's/^[^:]*: gate --[a-z-]* failed: peak [^(]*(\([0-9]*\) bytes)\( on device -\{0,1\}[0-9]*\)\{0,1\} in .*$/\1\2/p' | head -1
        }
        over=$(printf '%s\n' "$gates" | sed -n 's/^[^:]*: gate --[a-z-]* failed: peak [^)]*)\( on device -\{0,1\}[0-9]*\)\{0,1\} in \(.*\.oomt\)\( exceeds \| is \|, the baseline\).*$/\2/p' | head -1)
        if [ -n "$over" ] && [ "$over" != "${target:-}" ] && [ -f "$over" ]; then
            same=""
            if [ -n "${target:-}" ] && [ -f "$target" ]; then
                mine=$(read_with_gate --no-symbolize -o /dev/null "$target" 2>&1 | gate_peak)
                [ -n "$mine" ] && [ "$mine" = "$(printf '%s\n' "$gates" | gate_peak)" ] && same=1
            fi
            if [ -z "$same" ]; then
                echo "== oomtrace: the gate's peak is in ${over##*/}, not in the snapshot reported above; its call sites at the peak:" >&2
                "$reader" --top 5 --frames 6 --at peak "$over" 2>&1 |
                    awk 'NR == 1 { print; next } /^Top call sites at the peak/ { on = 1 } on && /^$/ { exit } on' >&2
            fi
        fi
    fi
    # A failed command's status is the launcher's: said last, with the gates', so that a red CI step reads as the
    # command's failure when the gate passed.
    # A command ended by the signal the launcher passed on (kill PID of the launcher, a CI cancel) did not fail of
    # itself: said as what happened.
    status_line=""
    if [ "$rc" -ne 0 ]; then
        ours=""
        [ "${passed:-0}" -ne 0 ] && { [ "$sig" -eq "$passed" ] || { [ "$sig" -eq 0 ] && [ "$rc" -eq $((128 + passed)) ]; }; } &&
            ours="SIG$(kill -l "$passed")"
        if [ -n "$ours" ] && [ "$sig" -ne 0 ]; then
            status_line="$cmd was ended by $ours, which oomtrace passed on from its own $ours; the launcher's status is $rc"
        elif [ -n "$ours" ]; then
            status_line="$cmd exited with status $rc after the $ours oomtrace passed on from its own, the launcher's status too"
        elif [ "$sig" -eq 2 ] || [ "$sig" -eq 15 ] || [ "$sig" -eq 1 ]; then
            # a request to end (Ctrl-C, timeout, a scheduler's stop), sent to the command itself: not a failure
            ours="SIG$(kill -l "$sig")"
            case $sig in
            2) how="Ctrl-C or a SIGINT to its process group" ;;
            1) how="its terminal hung up, or a SIGHUP to its process group" ;;
            *) how="a SIGTERM sent to it or its process group" ;;
            esac
            status_line="$cmd was ended by $ours ($how); the launcher's status is $rc"
        elif [ "$sig" -ne 0 ]; then
            status_line="$cmd was killed by SIG$(kill -l "$sig"); the launcher's status is $rc"
        else
            status_line="$cmd exited with status $rc, the launcher's status too"
        fi
        if [ -n "$gate" ] && [ "$grc" -eq 0 ] && [ -n "$ours" ]; then
            status_line="$status_line (the gate passed)"
        elif [ -n "$gate" ] && [ "$grc" -eq 0 ]; then
            status_line="$status_line (the command's own failure: the gate passed)"
        elif [ -n "$gate" ]; then
            status_line="$status_line (and the gate failed)"
        fi
        echo "== oomtrace: $status_line" >&2
    fi
    # The CI summary: the run's directory (where a script finds the snapshots), the command's failed status and
    # each gate's line (the reason a red job is red), the note said before the report, then the same report as
    # markdown.
    if [ -n "$summary" ]; then
        if [ "$nsnap" -gt 0 ]; then
            { printf '\n`%s run`: the snapshots are in `%s`\n\n' "$me" "$rundir" &&
                { [ "$ninner" -eq 0 ] || printf '`%s run`: %s inside the command wrote snapshots too, into %s\n\n' "$me" "$runs" "$(join_and "$inner")"; } &&
                { [ -z "$status_line" ] || printf '`%s run`: **%s**\n\n' "$me" "$status_line"; } &&
                { [ -z "$gates" ] || printf '%s\n' "$gates" | summary_gate_lines; } &&
                { [ -z "$note" ] || printf '`%s run`: %s\n\n' "$me" "$note"; } &&
                "$reader" --format markdown --top 5 "$target"; } \
                >>"$summary" 2>/dev/null || echo "$me: the summary could not be appended to $summary" >&2
        else
            { printf '\n`%s run`: the snapshots were written by %s, into %s\n\n' "$me" "$runs" "$(join_and "$inner")" &&
                { [ -z "$status_line" ] || printf '`%s run`: **%s**\n\n' "$me" "$status_line"; } &&
                printf '%s\n' "$gates" | summary_gate_lines; } >>"$summary" 2>/dev/null ||
                echo "$me: the summary could not be appended to $summary" >&2
        fi
    fi
    [ "$rc" -ne 0 ] && exit "$rc"
    [ "$grc" -eq 1 ] && exit 1
    exit 0
}
