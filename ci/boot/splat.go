package boot

import (
	"regexp"
	"strings"
)

// Splat is one kernel oops, BUG, WARNING, lockdep report, panic, hung task or RCU stall in
// the guest's kernel log. Any splat fails a user run.
type Splat struct {
	Kind  string   // WARNING, BUG, Oops, lockdep, panic, hung task, RCU stall, UBSAN
	Title string   // the line that starts it, without its timestamp (plus the RIP when known)
	Lines []string // the whole report, as logged
	Line  int      // 1-based line of Title in Source
	// Source is the log it was found in: "kernel log", or "console" for a report the kernel
	// log lacks (a panic stops the forwarder before its report reaches the host).
	Source string
}

// splatStart matches the first line of a report (timestamps removed).
var splatStart = regexp.MustCompile(`^(?:WARNING: |BUG: |kernel BUG at |Oops: |general protection fault|Kernel panic - not syncing|UBSAN: |INFO: task .* blocked for more than|rcu: INFO: .*detected stalls|INFO: rcu_.* detected stall|======+\s*$)`)

// lockdepRE: lockdep's reports are WARNING: lines of their own kind.
var lockdepRE = regexp.MustCompile(`^WARNING: (possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|bad unlock balance|held lock freed|lock held when returning|possible irq lock inversion|Nested lock was not taken|.*locking)`)

var ripRE = regexp.MustCompile(`RIP: [0-9a-f]{4}:(\S+)`)

// maxSplatLines bounds one report; a guest that logs without end must not make one splat
// hold the whole log.
const maxSplatLines = 80

// FindSplats returns the reports in a kernel log (dmesg or console lines). A report ends at
// its "---[ end ..." line; without one, after its last "</TASK>", before the next report, or
// after maxSplatLines. Lockdep's "=====" banner line joins the report it introduces.
func FindSplats(lines []string) []Splat { return findSplats(lines, "kernel log") }

func findSplats(lines []string, source string) []Splat {
	var out []Splat
	for i := 0; i < len(lines); i++ {
		msg := stripTimestamp(lines[i])
		if !splatStart.MatchString(msg) {
			continue
		}
		start := i
		if strings.HasPrefix(msg, "=====") {
			// A lockdep banner counts only when a report follows it.
			if i+1 >= len(lines) || !splatStart.MatchString(stripTimestamp(lines[i+1])) || strings.HasPrefix(stripTimestamp(lines[i+1]), "=====") {
				continue
			}
			i++
			msg = stripTimestamp(lines[i])
		}
		end, lastTask, stop := -1, -1, min(len(lines), start+maxSplatLines)
		for j := i + 1; j < stop; j++ {
			m := stripTimestamp(lines[j])
			if strings.HasPrefix(m, "---[ end ") {
				end = j
				break
			}
			if splatStart.MatchString(m) && !strings.HasPrefix(m, "Oops: ") && !strings.HasPrefix(m, "general protection fault") {
				stop = j // the next report (an Oops line continues a BUG line's report)
				break
			}
			if strings.TrimSpace(m) == "</TASK>" {
				lastTask = j
			}
		}
		switch {
		case end >= 0:
		case lastTask >= 0:
			end = lastTask
		default:
			end = stop - 1
		}
		s := Splat{Kind: splatKind(msg), Title: msg, Lines: append([]string(nil), lines[start:end+1]...), Line: i + 1, Source: source}
		for _, l := range s.Lines {
			if m := ripRE.FindStringSubmatch(l); m != nil {
				if !strings.Contains(s.Title, m[1]) {
					s.Title += " (RIP " + m[1] + ")"
				}
				break
			}
		}
		out = append(out, s)
		i = end
	}
	return out
}

// String is the title, prefixed with the kind when the title does not start with it.
func (s Splat) String() string {
	if strings.HasPrefix(s.Title, s.Kind) {
		return s.Title
	}
	return s.Kind + ": " + s.Title
}

func splatKind(msg string) string {
	switch {
	case lockdepRE.MatchString(msg):
		return "lockdep"
	case strings.HasPrefix(msg, "WARNING: "):
		return "WARNING"
	case strings.HasPrefix(msg, "Kernel panic"):
		return "panic"
	case strings.HasPrefix(msg, "Oops"), strings.HasPrefix(msg, "general protection fault"):
		return "Oops"
	case strings.HasPrefix(msg, "UBSAN: "):
		return "UBSAN"
	case strings.HasPrefix(msg, "INFO: task "):
		return "hung task"
	case strings.Contains(msg, "stall"):
		return "RCU stall"
	}
	return "BUG"
}

// mergeSplats adds to the kernel log's splats those of the console it lacks (a panic stops the
// kmsg forwarder before its report reaches the host; the console still shows it).
func mergeSplats(fromLog, fromConsole []Splat) []Splat {
	out := append([]Splat(nil), fromLog...)
	seen := map[string]bool{}
	for _, s := range fromLog {
		seen[s.Title] = true
	}
	for _, s := range fromConsole {
		if !seen[s.Title] {
			out = append(out, s)
			seen[s.Title] = true
		}
	}
	return out
}
