#!/usr/bin/env bash
# How long the terminal UI takes to show its first frame, as a user over tmux sees it: from the
# moment tmux is asked to start `edgeprof` in a fresh 80x24 pane (its own empty HOME, so no
# state carries over) until the pane shows the tab bar. tmux's own start and the polling (every
# 2 ms) are included, so the figure is an upper bound. Prints each launch, then the median and
# the range.
#
#   scripts/first-frame.sh BINARY [LAUNCHES]     (LAUNCHES: 10)
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v tmux >/dev/null || { echo "first-frame.sh: tmux is needed" >&2; exit 2; }
bin="$(readlink -f "$1")"
launches="${2:-10}"
work="$(mktemp -d)"
socket="$work/tmux.sock"
trap 'tmux -S "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmux -S "$socket" -f /dev/null start-server \; set -g exit-empty off

times=()
for i in $(seq 1 "$launches"); do
    home="$work/home$i"
    mkdir -p "$home"
    start=$(date +%s%N)
    tmux -S "$socket" new-session -d -s "f$i" -x 80 -y 24 \
        "cd '$home' && HOME='$home' TERM=xterm-256color exec '$bin'"
    shown=""
    for _ in $(seq 1 2500); do
        if tmux -S "$socket" capture-pane -p -t "f$i" 2>/dev/null | grep -q "1 Cond"; then
            shown=$(date +%s%N)
            break
        fi
        sleep 0.002
    done
    tmux -S "$socket" kill-session -t "f$i" 2>/dev/null || true
    if [ -z "$shown" ]; then
        echo "launch $i: no first frame within 5 s" >&2
        exit 1
    fi
    ms=$(( (shown - start) / 1000000 ))
    times+=("$ms")
    echo "launch $i: ${ms} ms"
done
printf '%s\n' "${times[@]}" | sort -n | awk '
    { v[NR] = $1 }
    END {
        median = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "first frame over %d launches: median %s ms, range %s-%s ms\n", NR, median, v[1], v[NR]
    }'
