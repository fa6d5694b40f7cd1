package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	vgpu "vgpu"
	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/images"
)

// errTestsFailed makes `vgpu run` exit non-zero after printing its summary.
var errTestsFailed = errors.New("the guest suite failed")

// run is the main job: fetch/build what is missing, serve the device, boot the guest, run the
// guest suite and print a summary.
func run(args []string) error {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	iommu := fl.String("iommu", "", "guest IOMMU: off, on (emulated VT-d, intel_iommu=on) or both (two boots); default both for vgpu's suite, off for a user run")
	suiteFlag := fl.String("suite", "", "guest suites: ktap (vgpu_test.ko on the cloud kernel), drm (vgpu_drm.ko and vgpu-drmtest on the generic kernel) or all; default all (ktap with --kernel)")
	tests := fl.String("tests", "", "comma-separated guest test cases of either suite (each goes to the suites that have it; ktap:NAME or drm:NAME to choose); empty = all")
	flavour := fl.String("flavour", "", "guest kernel of a user run (--module/--run/--add): cloud (default) or generic (Debian's generic kernel, with DRM); each suite has its own")
	drmSrc := fl.String("drm-src", "", "build vgpu_drm.ko from this directory (default: the checkout's guest/drm)")
	kernel := fl.String("kernel", "", "bring your own guest kernel (vmlinux or bzImage) instead of the pinned Debian one")
	headers := fl.String("headers", "", "with --kernel: the kernel's build tree or headers (KDIR) to build the module against")
	modulesDir := fl.String("modules", "", "with --kernel: its modules folder (lib/modules/<release>): the virtio console modules, and those --module names")
	moduleSrc := fl.String("module-src", "", "build the guest modules from this directory (its Kbuild); without vgpu_test.ko among them the run is a user run")
	keep := fl.Bool("keep", false, "after the suite, keep the VM with a shell on the serial console (this terminal)")
	out := fl.String("out", "", "folder for logs (console, kernel log, server, results); default: a temporary folder, kept on failure")
	var modArgs, runs, adds, appends listFlag
	fl.Var(&modArgs, "module", "NAME[=ARGS]: load this module (from --module-src, else the guest kernel's, with its dependencies) with parameters; repeatable, in order")
	fl.Var(&runs, "run", "CMD: run this shell command in the guest after loading the modules (busybox sh); repeatable, in order; each must exit 0")
	fl.Var(&adds, "add", "HOST[:GUEST]: put a file or folder into the guest's initramfs (default GUEST: /<name>); repeatable")
	fl.Var(&appends, "append", "ARGS: add kernel parameters (e.g. loglevel=8, dyndbg=...); repeatable")
	timeout := fl.Duration("timeout", 0, fmt.Sprintf("bound on each guest boot (kernel boot, modules, commands, power-off); default %v, %v for the DRM suite", boot.DefaultTimeout, drmTimeout))
	ctlPath := fl.String("control", "", "serve a control socket here while each guest runs (`vgpu status --control PATH`; owner-only)")
	console := fl.Bool("console", false, "stream the guest's serial console (with the kernel log) to stderr as it runs")
	jsonOut := fl.String("json", "", "write the results as JSON to this file")
	mirror := fl.String("debian-mirror", "", "Debian archive to download QEMU and the guest from (default: $"+images.MirrorEnv+", else the host's apt sources)")
	securityMirror := fl.String("debian-security-mirror", "", "Debian security archive for the guest kernel (default: $"+images.SecurityMirrorEnv+", else the host's apt sources)")
	devFlags := addDeviceFlags(fl)
	tracePath := addRunTraceFlag(fl)
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (a command for the guest goes in --run)", fl.Args())
	}
	var mods []moduleArg
	for _, m := range modArgs {
		a, err := parseModuleArg(m)
		if err != nil {
			return err
		}
		mods = append(mods, a)
	}
	var files []images.PlanFile
	for _, a := range adds {
		f, err := images.ParsePlanFile(a)
		if err != nil {
			return err
		}
		if _, err := os.Stat(f.Host); err != nil {
			return fmt.Errorf("--add %s: %w", a, err)
		}
		files = append(files, f)
	}
	timeoutSet := false
	fl.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	if timeoutSet && *timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", *timeout)
	}
	devCfg, err := devFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "vgpu-run-"); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, "== preparing QEMU and the guest image (cached after the first run)")
	qemu, err := images.QEMU(ctx, images.QEMUOptions{Progress: os.Stderr, Mirror: *mirror})
	if err != nil {
		return err
	}
	guestOpts := images.GuestOptions{Progress: os.Stderr, Kernel: *kernel, HeadersDir: *headers, ModulesDir: *modulesDir,
		Mirror: *mirror, SecurityMirror: *securityMirror, Flavour: *flavour, DRMSrc: *drmSrc}
	img, plan, user, err := userPlan(ctx, guestOpts, *moduleSrc, mods, runs, files)
	if err != nil {
		return err
	}
	// The suites to run, each with its image and its share of --tests (inject_suite.go).
	var suites []suiteRun
	if plan == nil {
		if *flavour != "" {
			return fmt.Errorf("--flavour chooses the kernel of a user run (--module/--run/--add); the suites run on their own (ktap: cloud, drm: generic)")
		}
		names, err := suiteList(*suiteFlag, *kernel != "")
		if err != nil {
			return err
		}
		if *suiteFlag == "" && *drmSrc == "" && containsSuite(names, images.SuiteDRM) {
			// By default the DRM suite runs where it can be built: from a checkout that has it.
			if err := images.DRMSuiteSources(); err != nil {
				fmt.Fprintf(os.Stderr, "== the DRM suite does not run: %v (--suite drm insists)\n", err)
				names = []string{images.SuiteKTAP}
			}
		}
		src := *moduleSrc
		if src == "" {
			if src, err = vgpu.WriteGuestSources(filepath.Join(dir, "module-src")); err != nil {
				return err
			}
		}
		cases, err := ktapCases(src)
		if err != nil && containsSuite(names, images.SuiteKTAP) {
			return fmt.Errorf("the vgpu_test cases of %s: %w", src, err)
		}
		imgs := map[string]*images.GuestImage{}
		for _, name := range names {
			opts := guestOpts
			opts.Suite = name
			if name == images.SuiteKTAP {
				opts.ModuleSrc = src
			}
			fmt.Fprintf(os.Stderr, "== preparing the %s\n", suiteTitle(name))
			if imgs[name], err = images.Guest(ctx, opts); err != nil {
				return fmt.Errorf("%s: %w", suiteTitle(name), err)
			}
		}
		var drmList []string
		if g := imgs[images.SuiteDRM]; g != nil {
			drmList = drmCases(ctx, g.DRMTest)
		}
		sel, err := splitTests(*tests, names, cases, drmList)
		if err != nil {
			return err
		}
		for _, name := range names {
			if *tests != "" && len(sel[name]) == 0 {
				fmt.Fprintf(os.Stderr, "== %s: --tests names none of its cases; not run\n", suiteTitle(name))
				continue
			}
			all := cases
			if name == images.SuiteDRM {
				all = drmList
			}
			suites = append(suites, suiteBoots(name, imgs[name], sel[name], all)...)
		}
	} else {
		if *tests != "" {
			return fmt.Errorf("--tests chooses the suites' cases; this is a user run (%s)", user)
		}
		if *suiteFlag != "" {
			return fmt.Errorf("--suite chooses vgpu's suites; this is a user run (%s)", user)
		}
		suites = []suiteRun{{name: "", img: img}}
	}
	if *iommu == "" {
		*iommu = "both"
		if plan != nil {
			*iommu = "off"
		}
	}
	modes, err := iommuModes(*iommu)
	if err != nil {
		return err
	}
	var consoleW io.Writer
	if *console {
		consoleW = os.Stderr
	}
	report := &jsonReport{Passed: true}

	failed := false
	var outcomes []bootOutcome
	for si, sr := range suites {
		for mi, on := range modes {
			if *keep && (si > 0 || mi > 0) {
				break // one VM to keep
			}
			name := map[bool]string{false: "no IOMMU", true: "intel-iommu"}[on]
			what := "the guest"
			if sr.name != "" {
				what = "the " + suiteTitle(sr.name) + sr.note()
			}
			fmt.Fprintf(os.Stderr, "== booting %s (%s, QEMU %s)\n", what, name, qemu.Version())
			runDir := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if sr.name != "" && len(suites) > 1 {
				runDir = filepath.Join(dir, sr.dir()+"-"+strings.ReplaceAll(name, " ", "-"))
			}
			name += sr.note()
			bound, extra := suiteBounds(sr.name, *timeout)
			res, err := boot.Run(ctx, boot.Config{
				QEMU: qemu, Guest: sr.img, Device: sr.device(devCfg), IOMMU: on, TestArgs: sr.testArgs,
				Dir: runDir, Keep: *keep, Timeout: bound, Plan: plan, Append: append(extra, appends...), Console: consoleW,
				TracePath: tracePath(sr.name, name),
				OnDevice:  runControl(*ctlPath),
			})
			if err != nil {
				return err
			}
			printTrace(os.Stderr, res)
			writeTimeline(os.Stderr, res)
			judgeSuite(sr.name, res)
			sr.judge(res)
			if plan != nil {
				printUserSummary(os.Stdout, name, res)
			} else {
				printSuiteSummary(os.Stdout, sr.name, name, res)
			}
			report.Boots = append(report.Boots, suiteJSON(sr.name, name, res))
			outcomes = append(outcomes, bootOutcome{sr.name, name, res})
			if res.Failed() {
				failed = true
				report.Passed = false
			}
		}
	}
	if plan == nil && len(outcomes) > 1 {
		printOverall(os.Stdout, outcomes)
	}
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, report); err != nil {
			return err
		}
	}
	if failed {
		fmt.Printf("\nlogs kept in %s\n", dir)
		return errTestsFailed
	}
	if *out == "" {
		os.RemoveAll(dir)
	}
	return nil
}

func iommuModes(s string) ([]bool, error) {
	switch s {
	case "off":
		return []bool{false}, nil
	case "on":
		return []bool{true}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("--iommu %q: want off, on or both", s)
}

func testArgs(tests string) string {
	if tests == "" {
		return ""
	}
	return "tests=" + tests
}

// bootOutcome is one boot of a suite, for the overall summary.
type bootOutcome struct {
	suite, mode string
	res         *boot.Result
}

// printSuiteSummary is printSummary for one boot of a suite, with the DRM figures of the DRM
// suite.
func printSuiteSummary(w io.Writer, suite, mode string, res *boot.Result) {
	title := mode
	if suite != "" {
		title = suite + ", " + mode
	}
	printSummary(w, title, res)
	if suite != images.SuiteDRM {
		return
	}
	figs, problems := parsePerf(res.Report)
	if len(figs) > 0 {
		fmt.Fprintln(w, "DRM figures (measured in this boot; user queue from userspace, no ioctl per job, vs the driver's kernel queue through an ioctl):")
		for _, l := range drmFigureLines(figs) {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, p := range problems {
		fmt.Fprintf(w, "  PROBLEM %s\n", p)
	}
}

// printOverall writes one line per boot: suite, IOMMU mode, verdict and case counts.
func printOverall(w io.Writer, outcomes []bootOutcome) {
	fmt.Fprintln(w, "\nsummary:")
	for _, o := range outcomes {
		verdict := "PASS"
		if o.res.Failed() {
			verdict = "FAIL"
		}
		var pass, fail, skip int
		var count func([]*ktap.Test)
		count = func(ts []*ktap.Test) {
			for _, t := range ts {
				switch t.Result {
				case ktap.Pass:
					pass++
				case ktap.Fail:
					fail++
				default:
					skip++
				}
			}
		}
		if o.res.Report != nil {
			count(o.res.Report.Tests)
		}
		line := fmt.Sprintf("  %-4s %-5s %-12s %3d passed, %d failed, %d skipped, %d problems  %v", verdict, o.suite, o.mode,
			pass, fail, skip, len(o.res.Problems)+len(o.res.Report.Problems), o.res.Wall.Round(time.Millisecond))
		fmt.Fprintln(w, line)
	}
}

// durationRE finds the module's "<case>: N ms" timing note among a case's diagnostics.
var durationRE = regexp.MustCompile(`^\S+: (\d+) ms$`)

// printSummary writes what one boot showed: every case with its time (and the subtests of a
// failed one), the guest's figures beside their baseline, problems and the device's diagnostics.
func printSummary(w io.Writer, mode string, res *boot.Result) {
	fmt.Fprintf(w, "\nvgpu guest suite (%s): boot + tests + power-off in %v\n", mode, res.Wall.Round(time.Millisecond))
	var walk func([]*ktap.Test, string)
	walk = func(ts []*ktap.Test, indent string) {
		for _, t := range ts {
			verdict := map[ktap.Result]string{ktap.Pass: "PASS", ktap.Fail: "FAIL", ktap.Skip: "SKIP"}[t.Result]
			timing := ""
			for _, d := range t.Diagnostics {
				if m := durationRE.FindStringSubmatch(d); m != nil {
					timing = m[1] + " ms"
				}
			}
			line := fmt.Sprintf("%s%-4s %-28s %8s", indent, verdict, t.Name, timing)
			if t.Result != ktap.Pass && t.Directive != "" {
				line += "  # " + t.Directive
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			if t.Result == ktap.Fail {
				walk(t.Subtests, indent+"    ")
				if len(t.Subtests) == 0 {
					// The reason is in the case's diagnostics (the DRM program puts it there).
					writeLines(w, indent+"    | ", tail(failureNotes(t), 6))
				}
			}
		}
	}
	walk(res.Report.Tests, "  ")
	if !res.Figures.Empty() {
		fmt.Fprintln(w, "guest figures (measured in this boot):")
		for _, l := range res.Figures.Lines() {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, s := range res.Splats {
		fmt.Fprintf(w, "  SPLAT   %s\n", s)
	}
	for _, p := range append(res.Report.Problems, res.Problems...) {
		fmt.Fprintf(w, "  PROBLEM %s\n", p)
	}
	fmt.Fprintf(w, "device diagnostics:\n%s", indent(res.Diagnostics.String(), "  "))
	if res.Failed() {
		if len(res.LastOutput) > 0 {
			fmt.Fprintln(w, "console, last lines:")
			writeLines(w, "  ", res.LastOutput)
		}
		printArtefacts(w, res)
	}
}

// failureNotes are a failed case's diagnostics without its timing note.
func failureNotes(t *ktap.Test) []string {
	var out []string
	for _, d := range t.Diagnostics {
		if !durationRE.MatchString(d) {
			out = append(out, d)
		}
	}
	return out
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
