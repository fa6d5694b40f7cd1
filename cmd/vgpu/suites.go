package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"vgpu/ci/boot"
	"vgpu/images"
)

// suiteList reads --suite: ktap, drm or all (both, in that order). The default is all, or ktap
// with a kernel of your own (--kernel: the DRM suite needs its DRM modules too, --modules).
func suiteList(flag string, ownKernel bool) ([]string, error) {
	switch flag {
	case "":
		if ownKernel {
			return []string{images.SuiteKTAP}, nil
		}
		return images.Suites(), nil
	case "all":
		return images.Suites(), nil
	case images.SuiteKTAP, images.SuiteDRM:
		return []string{flag}, nil
	}
	return nil, fmt.Errorf("--suite %q: want ktap, drm or all", flag)
}

// suiteTitle names a suite in the summary.
func suiteTitle(suite string) string {
	if suite == images.SuiteDRM {
		return "DRM suite (vgpu_drm.ko + vgpu-drmtest, generic kernel)"
	}
	return "KTAP suite (vgpu_test.ko, cloud kernel)"
}

// ktapCaseRE matches an entry of vgpu_test's case table in guest/main.c: { "name", t_fn },
var ktapCaseRE = regexp.MustCompile(`(?m)^\s*\{\s*"([a-z0-9_]+)",\s*t_[a-z0-9_]+\s*\},`)

// ktapCases lists the cases of the vgpu_test sources in dir (its main.c), in report order.
func ktapCases(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "main.c"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ktapCaseRE.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out, nil
}

// splitTests assigns the --tests names to the suites that run: a name prefixed "ktap:" or
// "drm:" goes to that suite; any other to each running suite that has a case of that name
// (ktapCases: vgpu_test's; drmCases: vgpu-drmtest --list; protected_fence is in both). A name
// no running suite has is an error, unless a running suite's cases are not known (nil): it
// then goes to that suite (the DRM one first), which reports names it does not know. The result
// has a key for each suite that gets a name; with tests empty it is empty (every suite runs
// all its cases).
func splitTests(tests string, suites, ktapCases, drmCases []string) (map[string][]string, error) {
	out := map[string][]string{}
	runs := func(s string) bool { return containsSuite(suites, s) }
	for _, n := range strings.Split(tests, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if s, name, ok := strings.Cut(n, ":"); ok {
			if s != images.SuiteKTAP && s != images.SuiteDRM {
				return nil, fmt.Errorf("--tests %s: %q is no suite (want ktap: or drm:)", n, s)
			}
			if !runs(s) {
				return nil, fmt.Errorf("--tests %s: the %s suite does not run (--suite)", n, s)
			}
			out[s] = append(out[s], name)
			continue
		}
		found := false
		if runs(images.SuiteKTAP) && containsSuite(ktapCases, n) {
			out[images.SuiteKTAP] = append(out[images.SuiteKTAP], n)
			found = true
		}
		if runs(images.SuiteDRM) && containsSuite(drmCases, n) {
			out[images.SuiteDRM] = append(out[images.SuiteDRM], n)
			found = true
		}
		switch {
		case found:
		case runs(images.SuiteDRM) && drmCases == nil:
			out[images.SuiteDRM] = append(out[images.SuiteDRM], n)
		case runs(images.SuiteKTAP) && ktapCases == nil:
			out[images.SuiteKTAP] = append(out[images.SuiteKTAP], n)
		default:
			var known []string
			if runs(images.SuiteKTAP) {
				known = append(known, "ktap: "+strings.Join(ktapCases, ","))
			}
			if runs(images.SuiteDRM) {
				known = append(known, "drm: "+strings.Join(drmCases, ","))
			}
			return nil, fmt.Errorf("--tests %s: no suite that runs has such a case (%s)", n, strings.Join(known, "; "))
		}
	}
	return out, nil
}

// drmCases asks the DRM suite's program for its cases (vgpu-drmtest --list: a static
// linux/amd64 binary, which runs on such a host as in the guest); nil when it cannot say.
func drmCases(ctx context.Context, program string) []string {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" || program == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, program, "--list").Output()
	if err != nil {
		return nil
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if strings.ContainsAny(l, " \t,") {
				return nil // not a list of names
			}
			names = append(names, l)
		}
	}
	return names
}

func containsSuite(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suiteTestArgs is what /init hands the suite for a selection (nil: every case): vgpu_test's
// tests= parameter, vgpu-drmtest's --tests flag.
func suiteTestArgs(suite string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	if suite == images.SuiteDRM {
		return "--tests " + strings.Join(names, ",")
	}
	return testArgs(strings.Join(names, ","))
}

// drmInitProblems judges /init's report of the DRM suite (init.sh, drm_suite): every DRM module
// and vgpu_drm.ko load, the render node appears, the program exits 0 and the driver unloads.
// (boot checks the lines every suite has: end, irqs-after-rmmod, kernel-warnings.)
func drmInitProblems(init map[string]string) []string {
	var p []string
	for _, c := range []struct{ key, what string }{
		{"drm-kmods", "loading the kernel's DRM modules"},
		{"drm-insmod", "insmod vgpu_drm.ko"},
		{"drmtest", "vgpu-drmtest's exit status"},
		{"drm-rmmod", "rmmod vgpu_drm"},
	} {
		got, ok := init[c.key]
		switch {
		case !ok:
			if _, ended := init["end"]; ended {
				p = append(p, fmt.Sprintf("%s: /init did not report it", c.what))
			}
		case got != "0":
			p = append(p, fmt.Sprintf("%s: %s, want 0", c.what, got))
		}
	}
	if n, ok := init["render-node"]; ok && n == "none" {
		p = append(p, "vgpu_drm.ko loaded but /dev/dri/renderD128 did not appear")
	}
	return p
}

// drmTimeout is the DRM suite's default bound on a boot: its program runs a dozen cases with
// child processes, hangs that wait for job timeouts and a performance case under TCG.
const drmTimeout = 15 * time.Minute

// suiteBounds returns a boot's timeout (flag: --timeout, 0 when not given) and the kernel
// parameters that bound the suite inside the guest: /init gives vgpu-drmtest a minute less
// than the host gives the boot (vgpu_drmtest_wait), so a stuck program is reported by /init,
// with what it printed, rather than cut off by the host.
func suiteBounds(suite string, flag time.Duration) (time.Duration, []string) {
	if suite != images.SuiteDRM {
		if flag == 0 {
			flag = boot.DefaultTimeout
		}
		return flag, nil
	}
	if flag == 0 {
		flag = drmTimeout
	}
	wait := int((flag - time.Minute) / time.Second)
	if wait < 30 {
		wait = 30
	}
	return flag, []string{fmt.Sprintf("vgpu_drmtest_wait=%d", wait)}
}

// judgeSuite adds what boot does not know of a suite to its result.
func judgeSuite(suite string, res *boot.Result) {
	if suite == images.SuiteDRM && res.User == nil {
		res.Problems = append(res.Problems, drmInitProblems(res.Init)...)
	}
}
