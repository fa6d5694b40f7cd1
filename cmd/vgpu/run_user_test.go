package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/images"
)

func TestParseModuleArg(t *testing.T) {
	for _, tc := range []struct {
		in, name, args string
		bad            bool
	}{
		{"mydrv", "mydrv", "", false},
		{"mydrv.ko=warn=1 name=\"a b\"", "mydrv", "warn=1 name=\"a b\"", false},
		{"drm-kms-helper=", "drm-kms-helper", "", false},
		{"=x", "", "", true},
		{"dir/mydrv", "", "", true},
	} {
		a, err := parseModuleArg(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (a.name != tc.name || a.args != tc.args)) {
			t.Errorf("parseModuleArg(%q) = %+v, %v", tc.in, a, err)
		}
	}
}

func TestPlanModules(t *testing.T) {
	built := []builtModule{{"mydrv", "/b/mydrv.ko", []string{"my_helper"}}, {"my_helper", "/b/my-helper.ko", nil}}
	withDeps := append(built[:2:2], builtModule{"my_drm", "/b/my_drm.ko", []string{"drm_kms_helper", "my_helper", "builtin"}})
	kernel := func(_ context.Context, names []string) ([]images.PlanModule, error) {
		switch names[0] {
		case "drm_kms_helper":
			return []images.PlanModule{{Name: "drm", Path: "/k/drm.ko"}, {Name: "drm_kms_helper", Path: "/k/drm_kms_helper.ko"}}, nil
		case "builtin":
			return nil, nil
		}
		return nil, errors.New("no such module")
	}
	names := func(ms []images.PlanModule) string {
		var s []string
		for _, m := range ms {
			x := m.Name
			if m.Args != "" {
				x += "=" + m.Args
			}
			if m.Dependency {
				x += "(dep)"
			}
			s = append(s, x)
		}
		return strings.Join(s, " ")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string // "" → an error
	}{
		{nil, "mydrv my_helper"},
		{[]string{"my-helper", "mydrv=warn=1"}, "my_helper mydrv=warn=1"},
		{[]string{"drm_kms_helper=x=1", "mydrv"}, "drm(dep) drm_kms_helper=x=1 mydrv"},
		{[]string{"builtin", "mydrv"}, "mydrv"},
		{[]string{"builtin=x=1"}, ""},
		{[]string{"nosuch"}, ""},
		{[]string{"mydrv", "mydrv"}, ""},
	} {
		var args []moduleArg
		for _, a := range tc.args {
			m, _ := parseModuleArg(a)
			args = append(args, m)
		}
		got, err := planModules(ctx, built, args, kernel)
		if tc.want == "" {
			if err == nil {
				t.Errorf("planModules(%q) = %s, want an error", tc.args, names(got))
			}
			continue
		}
		if err != nil || names(got) != tc.want {
			t.Errorf("planModules(%q) = %q, %v; want %q", tc.args, names(got), err, tc.want)
		}
	}
	// A built module's kernel dependencies come first, marked; its built ones are the user's
	// to order.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "mydrv my_helper drm(dep) drm_kms_helper(dep) my_drm"},
		{[]string{"my_drm=x=1"}, "drm(dep) drm_kms_helper(dep) my_drm=x=1"},
		{[]string{"drm_kms_helper", "my_drm"}, "drm(dep) drm_kms_helper my_drm"},
	} {
		var args []moduleArg
		for _, a := range tc.args {
			m, _ := parseModuleArg(a)
			args = append(args, m)
		}
		if got, err := planModules(ctx, withDeps, args, kernel); err != nil || names(got) != tc.want {
			t.Errorf("with dependencies, planModules(%q) = %q, %v; want %q", tc.args, names(got), err, tc.want)
		}
	}
	if _, err := planModules(ctx, withDeps, nil, nil); err == nil {
		t.Error("a built module that needs the kernel's modules, without them: accepted")
	}
	if _, err := planModules(ctx, built, []moduleArg{{name: "drm"}}, nil); err == nil {
		t.Error("a kernel module without the kernel's modules: accepted")
	}
}

func TestUserModeReason(t *testing.T) {
	vt := []builtModule{{"vgpu_test", "/b/vgpu_test.ko", nil}}
	my := []builtModule{{"mydrv", "/b/mydrv.ko", nil}}
	for _, tc := range []struct {
		mods       []moduleArg
		runs, adds []string
		src        string
		built      []builtModule
		user       bool
	}{
		{nil, nil, nil, "", nil, false},
		{nil, nil, nil, "guest", vt, false},
		{nil, nil, nil, "examples/mydrv", my, true},
		{nil, []string{"true"}, nil, "", nil, true},
		{nil, nil, []string{"f"}, "", nil, true},
		{[]moduleArg{{name: "vgpu_test"}}, nil, nil, "guest", vt, true},
	} {
		if got := userModeReason(tc.mods, tc.runs, tc.adds, tc.src, tc.built); (got != "") != tc.user {
			t.Errorf("userModeReason(%+v) = %q, want user run %v", tc, got, tc.user)
		}
	}
}

// TestUserSummary checks the summary and --json of a failed user run: each step with status
// and time, KTAP cases, the splat with its report, and where the logs are.
func TestUserSummary(t *testing.T) {
	res := &boot.Result{
		Report: &ktap.Report{Plan: -1},
		Wall:   2500 * time.Millisecond,
		User: &boot.UserReport{
			Modules: []boot.ModuleStep{{Name: "mydrv", Args: "warn=1", RC: "0", Time: 30 * time.Millisecond}},
			Runs: []boot.RunStep{{N: 1, Command: "sh /test.sh", RC: "0", Time: 40 * time.Millisecond},
				{N: 2, Command: "false", RC: "1", Output: []string{"why it failed"}}, {N: 3, Command: "sleep 9"}},
			Unloads: []boot.UnloadStep{{Name: "mydrv", RC: "0"}},
			KTAP:    []boot.KTAPDoc{{Source: "run 1", Report: ktap.Parse(strings.NewReader("KTAP version 1\n1..1\nnot ok 1 reads\n"))}},
		},
		Splats: []boot.Splat{{Kind: "WARNING", Title: "WARNING: CPU: 0 PID: 94 at mydrv.c:65 mydrv_probe+0x0/0x3a [mydrv]",
			Lines: []string{"[ 1.7] WARNING: CPU: 0 PID: 94 at mydrv.c:65", "[ 1.7] Call Trace:", "[ 1.7]  local_pci_probe+0x41/0x80"}, Line: 330, Source: "kernel log"}},
		Problems:   []string{"run 2 `false`: failed (exit 1)", "kernel splat: WARNING: CPU: 0 PID: 94 at mydrv.c:65"},
		KernelLog:  []string{"[ 1.8] mydrv 0000:00:02.0: removed"},
		LastOutput: []string{"# vgpu-init: end"},
		Init:       map[string]string{"end": ""},
		Artefacts:  map[string]string{"kernel log": "/logs/kernel.log"},
	}
	var b bytes.Buffer
	printUserSummary(&b, "no IOMMU", res)
	out := b.String()
	rest := out
	for _, w := range []string{
		"vgpu run (no IOMMU): FAIL in 2.5s",
		"module  mydrv warn=1", "loaded", "0.03s",
		"run 1   sh /test.sh", "PASS", "0.04s",
		"run 2   false", "FAIL (exit 1)", "| why it failed",
		"run 3   sleep 9", "DID NOT FINISH",
		"KTAP from run 1:", "FAIL reads",
		"unload  mydrv", "ok",
		"SPLAT   WARNING: CPU: 0 PID: 94 at mydrv.c:65 mydrv_probe+0x0/0x3a [mydrv]",
		"PROBLEM run 2 `false`: failed (exit 1)",
		"kernel WARNING report (kernel log line 330", "local_pci_probe",
		"kernel log, last lines:", "removed",
		"kernel log: /logs/kernel.log",
	} {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("summary lacks %q (in order):\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
	if strings.Contains(out, "what the guest printed last") {
		t.Errorf("console tail shown for a run that reached its end:\n%s", out)
	}

	jb, _ := json.Marshal(jsonBootOf("no IOMMU", res))
	var j map[string]any
	json.Unmarshal(jb, &j)
	runs := j["runs"].([]any)
	if j["passed"] != false || len(runs) != 3 || runs[1].(map[string]any)["status"] != "failed (exit 1)" ||
		runs[2].(map[string]any)["status"] != "did not finish" || len(j["splats"].([]any)) != 1 ||
		j["ktap"].([]any)[0].(map[string]any)["cases"].([]any)[0].(map[string]any)["result"] != "not ok" {
		t.Errorf("json %s", jb)
	}
}
