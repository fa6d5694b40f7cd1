package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"vgpu/control"
	"vgpu/inject"
)

// The control socket's inject command and `vgpu inject`'s request and output.
func TestInjectCommand(t *testing.T) {
	_, c := dialTestControl(t, newTestDevice(t))
	call := func(a injectArgs) (injectResult, error) {
		var r injectResult
		err := c.Call("inject", a, &r)
		return r, err
	}
	r, err := call(injectArgs{Op: "add", Rules: "irq.drop:vector=0,n=2; mes.hang:op=ADD_QUEUE"})
	if err != nil || len(r.IDs) != 2 || len(r.Rules) != 2 || r.Rules[1].Rule != "mes.hang:op=0x2,n=1" {
		t.Fatalf("add: %+v, %v", r, err)
	}
	if _, err := call(injectArgs{Op: "add", Rules: "irq.lose"}); !errors.Is(err, &control.Error{Code: control.CodeBadArgs}) ||
		!strings.Contains(err.Error(), "unknown rule kind") {
		t.Fatalf("bad rule: %v", err)
	}
	if _, err := call(injectArgs{Op: "explode"}); !errors.Is(err, &control.Error{Code: control.CodeBadArgs}) {
		t.Fatalf("bad op: %v", err)
	}
	if _, err := call(injectArgs{Op: "remove", ID: 99}); !errors.Is(err, &control.Error{Code: control.CodeBadArgs}) {
		t.Fatalf("remove of no rule: %v", err)
	}
	if r, err = call(injectArgs{Op: "remove", ID: r.IDs[0]}); err != nil || len(r.Rules) != 1 {
		t.Fatalf("remove: %+v, %v", r, err)
	}
	if r, err = call(injectArgs{Op: "list"}); err != nil || len(r.Rules) != 1 || r.Totals["mes.hang"] != 0 {
		t.Fatalf("list: %+v, %v", r, err)
	}
	var b bytes.Buffer
	printInject(&b, injectResult{IDs: []int{3}, Rules: []inject.Status{{ID: 3, Rule: "mes.hang:n=1", Seen: 1, Fired: 1, Spent: true}},
		Totals: map[string]uint64{"mes.hang": 1}})
	for _, want := range []string{"added rule 3", "mes.hang:n=1", "spent", "injections so far: mes.hang 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if r, err = call(injectArgs{Op: "clear"}); err != nil || len(r.Rules) != 0 {
		t.Fatalf("clear: %+v, %v", r, err)
	}
}

func TestInjectRequest(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  injectArgs
		err   bool
	}{
		{[]string{"list"}, injectArgs{Op: "list"}, false},
		{[]string{"clear"}, injectArgs{Op: "clear"}, false},
		{[]string{"remove", "4"}, injectArgs{Op: "remove", ID: 4}, false},
		{[]string{"remove"}, injectArgs{}, true},
		{[]string{"remove", "x"}, injectArgs{}, true},
		{[]string{"irq.drop:n=1;", "tlb.stale"}, injectArgs{Op: "add", Rules: "irq.drop:n=1; tlb.stale"}, false},
		{[]string{"iv.drop:src=CP_EOP"}, injectArgs{Op: "add", Rules: "iv.drop:src=CP_EOP"}, false},
		{[]string{"dma.fail"}, injectArgs{}, true},
		{nil, injectArgs{}, true},
	} {
		got, err := injectRequest(tc.words)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("%q: %+v, %v", tc.words, got, err)
		}
	}
	if err := injectCmd([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("vgpu inject -h: %v", err)
	}
}
