#!/usr/bin/env bash
# What edgeprof costs a board while it waits: the idle terminal UI (Conditions tab, 100×30, in
# tmux) and `monitor --headless --interval 100ms`. For each binary given, both are measured side
# by side (all binaries at once, so a busy machine weighs on each alike), from /proc: wake-ups
# are the voluntary context switches of all the process's threads, CPU is user + system time.
#
#   scripts/idle.sh BINARY [BINARY…]
#   scripts/idle.sh /tmp/edgeprof-before target/release/edgeprof
#
# TUI_SECONDS (30) and MONITOR_SECONDS (60) set the windows; SETTLE (3) the seconds given to
# start-up before the window opens. Needs tmux.
set -euo pipefail

if [ $# -eq 0 ]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v tmux >/dev/null || { echo "idle.sh: tmux is needed" >&2; exit 2; }
TUI_SECONDS="${TUI_SECONDS:-30}"
MONITOR_SECONDS="${MONITOR_SECONDS:-60}"
SETTLE="${SETTLE:-3}"
HZ="$(getconf CLK_TCK)"
WORK="$(mktemp -d)"
SOCKET="$WORK/tmux.sock"
PIDS=()
cleanup() {
    tmux -S "$SOCKET" kill-server 2>/dev/null || true
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Voluntary context switches of every thread of PID (threads that ended are not counted).
wakeups() {
    local total=0 n
    for status in /proc/"$1"/task/*/status; do
        n="$(awk '/^voluntary_ctxt_switches/ {print $2}' "$status" 2>/dev/null || echo 0)"
        total=$((total + ${n:-0}))
    done
    echo "$total"
}

# User + system clock ticks of PID, all threads.
ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# PID of the edgeprof a tmux pane runs (the pane's shell execs it).
pane_pid() {
    tmux -S "$SOCKET" display-message -p -t "$1" '#{pane_pid}'
}

measure() { # NAME PID SECONDS
    local w0 t0 w1 t1
    w0="$(wakeups "$2")"
    t0="$(ticks "$2")"
    sleep "$3"
    w1="$(wakeups "$2")"
    t1="$(ticks "$2")"
    awk -v name="$1" -v w=$((w1 - w0)) -v t=$((t1 - t0)) -v s="$3" -v hz="$HZ" \
        'BEGIN { printf "  %-52s %7.1f wake-ups/s  %6.2f %% of a core\n", name, w / s, 100 * t / hz / s }'
}

tmux -S "$SOCKET" -f /dev/null start-server \; set -g exit-empty off
TUI=()
MON=()
i=0
for bin in "$@"; do
    i=$((i + 1))
    abs="$(readlink -f "$bin")"
    home="$WORK/home$i"
    mkdir -p "$home"
    tmux -S "$SOCKET" new-session -d -s "tui$i" -x 100 -y 30 \
        "cd '$home' && HOME='$home' TERM=xterm-256color exec '$abs' tui"
    TUI+=("$(pane_pid "tui$i")")
    (cd "$home" && HOME="$home" exec "$abs" monitor --headless --interval 100ms >/dev/null 2>&1) &
    MON+=($!)
    PIDS+=($!)
done
sleep "$SETTLE"

# Measures every binary's process of one kind at once: SECONDS, then the pids in binary order.
measure_all() {
    local seconds="$1" pid bin waiting=()
    shift
    for bin in "${BINARIES[@]}"; do
        pid="$1"
        shift
        measure "$bin" "$pid" "$seconds" &
        waiting+=($!)
    done
    wait "${waiting[@]}"
}

BINARIES=("$@")
echo "idle terminal UI (Conditions tab, 100x30, ${TUI_SECONDS} s):"
measure_all "$TUI_SECONDS" "${TUI[@]}"
echo "monitor --headless --interval 100ms (${MONITOR_SECONDS} s):"
measure_all "$MONITOR_SECONDS" "${MON[@]}"
