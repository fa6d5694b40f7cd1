// Package ktap parses KTAP (the kernel's test output format, Documentation/dev-tools/ktap.rst)
// as it arrives from a guest: possibly interleaved with other kernel messages, prefixed with
// printk timestamps, and possibly cut short by a crash. The parser never fails on bad input;
// it records what is wrong in Report.Problems so the harness can fail the run with a reason.
package ktap

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Result is a test's verdict.
type Result int

const (
	Pass Result = iota
	Fail
	Skip
)

func (r Result) String() string {
	switch r {
	case Pass:
		return "ok"
	case Fail:
		return "not ok"
	}
	return "skip"
}

// Test is one result line with what belongs to it.
type Test struct {
	Number      int
	Name        string
	Result      Result
	Directive   string   // text after '#' on the result line (SKIP/TODO reason or a failure note)
	Diagnostics []string // '# ' lines printed at this test's level before its result line
	Plan        int      // subtests planned, -1 when no nested plan was printed
	Subtests    []*Test
}

// Report is a whole KTAP document.
type Report struct {
	Version     int
	Plan        int // -1 when missing
	Tests       []*Test
	Diagnostics []string // top-level '# ' lines after the last result
	Problems    []string // why the document cannot be trusted as complete
}

// Limits on guest-controlled input: a broken guest must not make the host parser use
// unbounded memory or recursion.
const (
	maxLineLen = 64 << 10
	maxDepth   = 16
	maxTests   = 1 << 20
)

var (
	timestampRE = regexp.MustCompile(`^\[\s*\d+\.\d+\]\s?`)
	versionRE   = regexp.MustCompile(`^K?TAP version (\d+)$`)
	planRE      = regexp.MustCompile(`^1\.\.(\d+)$`)
	resultRE    = regexp.MustCompile(`^(ok|not ok) (\d+)(?: -)?(?: ([^#]*?))?\s*(?:#\s*(.*))?$`)
)

// level is one open KTAP document (the top one or a nested subtest group).
type level struct {
	indent  int
	plan    int
	tests   []*Test
	pending []string // diagnostics waiting for the next result line
}

// Parse reads a KTAP document from r. Lines before the first top-level version line are
// ignored, as are lines that are not KTAP (other kernel messages).
func Parse(r io.Reader) *Report {
	rep := &Report{Plan: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	var stack []*level
	count := 0
	for sc.Scan() {
		raw := timestampRE.ReplaceAllString(strings.TrimRight(sc.Text(), "\r\n"), "")
		line := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(line)
		line = strings.TrimRight(line, " \t")
		if m := versionRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.Atoi(m[1])
			if len(stack) == 0 {
				if rep.Version != 0 {
					rep.Problems = append(rep.Problems, "a second top-level KTAP document started; ignoring it")
					break
				}
				rep.Version = v
				stack = append(stack, &level{indent: indent, plan: -1})
				continue
			}
			if indent > stack[len(stack)-1].indent && len(stack) < maxDepth {
				stack = append(stack, &level{indent: indent, plan: -1})
			}
			continue
		}
		if len(stack) == 0 {
			continue
		}
		// Close nested groups this line is shallower than; they must end with their parent's
		// result line at the shallower level.
		for len(stack) > 1 && indent < stack[len(stack)-1].indent {
			if !resultRE.MatchString(line) {
				break
			}
			child := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			parent := stack[len(stack)-1]
			t := parseResult(line)
			if t == nil {
				break
			}
			t.Subtests, t.Plan = child.tests, child.plan
			t.Diagnostics = append(parent.pending, child.pending...)
			parent.pending = nil
			parent.tests = append(parent.tests, t)
			count++
			line = "" // consumed
		}
		if line == "" {
			continue
		}
		cur := stack[len(stack)-1]
		if indent < cur.indent {
			// A shallower diagnostic belongs to an enclosing level (kunit prints suite totals
			// before the suite's result line); anything else is unrelated kernel output.
			if strings.HasPrefix(line, "#") {
				for i := len(stack) - 2; i >= 0; i-- {
					if stack[i].indent <= indent {
						stack[i].pending = append(stack[i].pending, strings.TrimSpace(strings.TrimPrefix(line, "#")))
						break
					}
				}
			}
			continue
		}
		switch {
		case planRE.MatchString(line):
			n, _ := strconv.Atoi(planRE.FindStringSubmatch(line)[1])
			cur.plan = n
		case resultRE.MatchString(line):
			if count >= maxTests {
				rep.Problems = append(rep.Problems, fmt.Sprintf("more than %d results; stopped reading", maxTests))
				return finish(rep, stack)
			}
			t := parseResult(line)
			t.Diagnostics, cur.pending = cur.pending, nil
			cur.tests = append(cur.tests, t)
			count++
		case strings.HasPrefix(line, "#"):
			d := strings.TrimSpace(strings.TrimPrefix(line, "#"))
			if !strings.HasPrefix(d, "Subtest:") {
				cur.pending = append(cur.pending, d)
			}
		}
	}
	if err := sc.Err(); err != nil {
		rep.Problems = append(rep.Problems, "reading output: "+err.Error())
	}
	return finish(rep, stack)
}

func parseResult(line string) *Test {
	m := resultRE.FindStringSubmatch(line)
	if m == nil {
		return nil
	}
	n, _ := strconv.Atoi(m[2])
	t := &Test{Number: n, Name: strings.TrimSpace(m[3]), Directive: strings.TrimSpace(m[4]), Plan: -1}
	switch {
	case m[1] == "not ok":
		t.Result = Fail
	case strings.HasPrefix(strings.ToUpper(t.Directive), "SKIP"):
		t.Result = Skip
	default:
		t.Result = Pass
	}
	return t
}

// finish closes whatever is open and checks plans.
func finish(rep *Report, stack []*level) *Report {
	if len(stack) == 0 {
		rep.Problems = append(rep.Problems, "no KTAP output (no \"KTAP version\" line)")
		return rep
	}
	for len(stack) > 1 {
		child := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rep.Problems = append(rep.Problems, fmt.Sprintf("output ends inside a group of subtests (%d results, no parent result line): truncated", len(child.tests)))
	}
	top := stack[0]
	rep.Tests, rep.Plan, rep.Diagnostics = top.tests, top.plan, top.pending
	checkPlans(rep, "", rep.Plan, rep.Tests)
	return rep
}

func checkPlans(rep *Report, where string, plan int, tests []*Test) {
	name := where
	if name == "" {
		name = "top level"
	}
	switch {
	case plan < 0 && where == "":
		rep.Problems = append(rep.Problems, "missing plan (1..N) at the top level")
	case plan >= 0 && plan != len(tests):
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: plan says %d tests, %d results seen", name, plan, len(tests)))
	}
	for i, t := range tests {
		if t.Number != i+1 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: result %q is numbered %d, expected %d", name, t.Name, t.Number, i+1))
		}
		if len(t.Subtests) > 0 || t.Plan >= 0 {
			checkPlans(rep, strings.TrimPrefix(where+"/"+t.Name, "/"), t.Plan, t.Subtests)
		}
	}
}

// Failed reports whether any test failed or the document has problems.
func (r *Report) Failed() bool {
	if len(r.Problems) > 0 {
		return true
	}
	var failed func([]*Test) bool
	failed = func(ts []*Test) bool {
		for _, t := range ts {
			if t.Result == Fail || failed(t.Subtests) {
				return true
			}
		}
		return false
	}
	return failed(r.Tests)
}

// String renders the report as an indented tree, for logs and golden files.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "KTAP version %d, plan %d\n", r.Version, r.Plan)
	var walk func([]*Test, string)
	walk = func(ts []*Test, indent string) {
		for _, t := range ts {
			fmt.Fprintf(&b, "%s%d %s: %s", indent, t.Number, t.Name, t.Result)
			if t.Directive != "" {
				fmt.Fprintf(&b, " (%s)", t.Directive)
			}
			b.WriteString("\n")
			for _, d := range t.Diagnostics {
				fmt.Fprintf(&b, "%s  # %s\n", indent, d)
			}
			walk(t.Subtests, indent+"    ")
		}
	}
	walk(r.Tests, "")
	for _, d := range r.Diagnostics {
		fmt.Fprintf(&b, "# %s\n", d)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	return b.String()
}
