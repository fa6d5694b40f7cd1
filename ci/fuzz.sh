#!/usr/bin/env bash
# Fuzz campaign: ci/fuzz.sh DURATION [PATTERN]
#
# Finds every fuzz target of the module (go test -list '^Fuzz' ./...), keeps those whose name
# matches the extended regular expression PATTERN (default: all), and runs them one after the
# other, each for DURATION (a go test -fuzztime value: 10s, 10m, 100000x) with one worker
# (-parallel 1), so a campaign occupies one core.
#
# For each target it prints executions, executions per second, new interesting inputs (coverage
# growth as go test reports it: inputs added to the generated corpus in $GOCACHE/fuzz) and
# crashers. A crasher is written by go test to PKG/testdata/fuzz/FuzzX/ and left there: commit it
# with the fix, and it runs as a regression input in every plain `go test` from then on.
#
# go test minimizes every new interesting input (up to -fuzzminimizetime, 60s by default) and
# reports those executions only when the minimization ends, so in a short run the counts can
# lag; FUZZ_MINIMIZE_TIME sets -fuzzminimizetime (0 turns minimization off, crashers included).
#
# Exits non-zero if any target crashed or could not run (a bare "context deadline exceeded" at
# the -fuzztime boundary, Go 1.26's coordinator shutdown race, is retried up to twice first).
# Set FUZZ_LOG_DIR to keep each target's full go test output (default: a temporary folder,
# removed at exit unless a target failed).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: ci/fuzz.sh DURATION [PATTERN]   e.g. ci/fuzz.sh 10m, ci/fuzz.sh 15s 'Config|L2'" >&2
  exit 2
fi
duration=$1
pattern=${2:-.}
minimize=()
if [ -n "${FUZZ_MINIMIZE_TIME:-}" ]; then
  minimize=(-fuzzminimizetime "$FUZZ_MINIMIZE_TIME")
fi

logdir=${FUZZ_LOG_DIR:-}
if [ -z "$logdir" ]; then
  logdir=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-fuzz.XXXXXX")
  cleanup_logs=1
else
  mkdir -p "$logdir"
  cleanup_logs=0
fi

# "pkg target" pairs. go test -list prints the matching names, then "ok  <pkg> <time>" per package.
list=$(go test -list '^Fuzz' ./... 2>&1) || {
  echo "ci/fuzz.sh: go test -list failed:" >&2
  echo "$list" >&2
  exit 1
}
targets=$(awk '
  /^Fuzz/ { names[++n] = $1; next }
  /^ok[ \t]/ { for (i = 1; i <= n; i++) print $2, names[i]; n = 0 }
' <<<"$list" | awk -v pat="$pattern" '$2 ~ pat')
if [ -z "$targets" ]; then
  echo "ci/fuzz.sh: no fuzz target matches '$pattern'" >&2
  exit 1
fi

echo "fuzz campaign: $(wc -l <<<"$targets") targets, $duration each, 1 worker, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-34s %12s %9s %8s %9s  %s\n' target execs execs/s new crashers result
failed=0

# shutdown_race LOG: the run failed only with Go's fuzz-coordinator shutdown race: the one
# failure is a bare "context deadline exceeded", with no failing input, panic or test output.
shutdown_race() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -q -E 'Failing input written|panic:|_test\.go:[0-9]+:|fuzz: minimizing' "$1" &&
    [ "$(grep -c -- '--- FAIL' "$1")" -eq 1 ]
}
while read -r pkg target; do
  dir=${pkg#$(go list -m)}
  dir=.${dir:-/}
  log="$logdir/${pkg//\//_}.$target.log"
  corpus="$dir/testdata/fuzz/$target"
  before=$(ls "$corpus" 2>/dev/null | sort)
  retried=0
  while :; do
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$duration" -parallel 1 "${minimize[@]}" "$dir" >"$log" 2>&1
    rc=$?
    # Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded" at
    # the -fuzztime boundary when its worker is slow to stop on a loaded machine
    # (golang/go#75804, fixed in Go 1.27): no input failed, none was written. Run such a
    # target again, at most twice; anything else that fails (a crasher, a panic, a failed
    # check, a written input) fails at once.
    if [ "$rc" -ne 0 ] && [ "$retried" -lt 2 ] && shutdown_race "$log" &&
       [ "$(ls "$corpus" 2>/dev/null | sort)" = "$before" ]; then
      retried=$((retried + 1))
      continue
    fi
    break
  done
  # Final status line: "fuzz: elapsed: 10m0s, execs: 12345 (1234/sec), new interesting: 3 (total: 20)".
  read -r elapsed execs new < <(awk '
    /^fuzz: elapsed: [0-9hms]+, execs: / { e = $3; x = $5; n = $9 }
    END {
      s = 0
      if (match(e, /[0-9]+h/)) s += substr(e, RSTART, RLENGTH - 1) * 3600
      if (match(e, /[0-9]+m/)) s += substr(e, RSTART, RLENGTH - 1) * 60
      if (match(e, /[0-9]+s/)) s += substr(e, RSTART, RLENGTH - 1)
      print s, x + 0, n + 0
    }' "$log")
  rate=0
  [ "${elapsed:-0}" -gt 0 ] && rate=$((execs / elapsed))
  after=$(ls "$corpus" 2>/dev/null | sort)
  crashers=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^$' || true)
  ncrash=$(grep -c . <<<"$crashers")
  result=ok
  [ "$retried" -gt 0 ] && result="ok (run $((retried + 1)) times: Go's -fuzztime shutdown race)"
  if [ "$rc" -ne 0 ]; then
    failed=1
    if [ "$ncrash" -gt 0 ]; then result=CRASH; else result="FAIL (see $log)"; fi
  fi
  printf '%-34s %12s %9s %8s %9s  %s\n' "$target" "$execs" "$rate" "$new" "$ncrash" "$result"
  for c in $crashers; do
    echo "    crasher: $corpus/$c   (re-run: go test -run '$target/$c' $dir)"
  done
  if [ "$rc" -ne 0 ]; then
    grep -E -- '--- FAIL|panic:|fuzz_test.go:[0-9]+:|_test.go:[0-9]+:' "$log" | head -8 | sed 's/^/    /'
  fi
done <<<"$targets"

if [ "$failed" -ne 0 ]; then
  echo "fuzz campaign: FAILED (logs in $logdir)"
  exit 1
fi
[ "$cleanup_logs" -eq 1 ] && rm -rf "$logdir"
echo "fuzz campaign: no crashers"
