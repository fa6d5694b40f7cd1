package inject

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRules(t *testing.T) {
	names := func(key, name string) (int, bool) {
		if key == "src" && name == "CP_EOP" {
			return 0xb5, true
		}
		if key == "op" && name == "ADD_QUEUE" {
			return 4, true
		}
		return 0, false
	}
	for _, tc := range []struct {
		text string
		want Rule
	}{
		{"irq.drop", func() Rule { r := newRule(IRQDrop); return r }()},
		{"irq.drop:vector=2", func() Rule { r := newRule(IRQDrop); r.Vector = 2; return r }()},
		{" irq.drop : n = 3 ", func() Rule { r := newRule(IRQDrop); r.N = 3; return r }()},
		{"irq.delay:vector=0,n=1,for=250ms", func() Rule {
			r := newRule(IRQDelay)
			r.Vector, r.N, r.Delay = 0, 1, 250*time.Millisecond
			return r
		}()},
		{"iv.drop:src=CP_EOP,n=1", func() Rule { r := newRule(IVDrop); r.Source, r.N = 0xb5, 1; return r }()},
		{"iv.drop:client=0x14", func() Rule { r := newRule(IVDrop); r.Client = 0x14; return r }()},
		{"iv.corrupt:n=2,new-src=0xff", func() Rule { r := newRule(IVCorrupt); r.N, r.NewSource = 2, 0xff; return r }()},
		{"iv.corrupt:xor1=0x80000000", func() Rule { r := newRule(IVCorrupt); r.XOR[1] = 0x80000000; return r }()},
		{"dma.fail:iova=0x1000-0x3000", func() Rule { r := newRule(DMAFail); r.Lo, r.Hi = 0x1000, 0x3000; return r }()},
		{"dma.fail:iova=0x1000+0x1000,dir=write,n=1", func() Rule {
			r := newRule(DMAFail)
			r.Lo, r.Hi, r.Dir, r.N = 0x1000, 0x2000, DirWrite, 1
			return r
		}()},
		{"queue.stall:slot=1", func() Rule { r := newRule(QueueStall); r.Slot = 1; return r }()},
		{"queue.stall:doorbell=0x400,n=every", func() Rule { r := newRule(QueueStall); r.Doorbell, r.N = 0x400, Every; return r }()},
		{"mes.hang", newRule(MESHang)},
		{"mes.hang:op=ADD_QUEUE", func() Rule { r := newRule(MESHang); r.Op = 4; return r }()},
		{"mes.hang:n=7", func() Rule { r := newRule(MESHang); r.N = 7; return r }()},
		{"tlb.stale:vmid=3", func() Rule { r := newRule(TLBStale); r.VMID = 3; return r }()},
	} {
		got, err := ParseRule(tc.text, names)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.text, got, tc.want)
		}
		// The canonical form reads back to the same rule.
		again, err := ParseRule(got.String(), nil)
		if err != nil || again != got {
			t.Errorf("%q: String %q reads back as %+v, %v", tc.text, got.String(), again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		text string
		want error
	}{
		{"", ErrEmpty},
		{"irq.lose", ErrUnknownKind},
		{"irq.drop:slot=1", ErrUnknownKey},
		{"irq.drop:vector=1,vector=2", ErrDuplicateKey},
		{"irq.drop:vector", ErrBadValue},
		{"irq.drop:vector=", ErrBadValue},
		{"irq.drop:vector=4096", ErrBadValue},
		{"irq.drop:n=0", ErrBadValue},
		{"irq.drop:n=-1", ErrBadValue},
		{"irq.delay", ErrMissingKey},
		{"irq.delay:for=11s", ErrBadValue},
		{"irq.delay:for=-1ms", ErrBadValue},
		{"irq.delay:for=soon", ErrBadValue},
		{"iv.drop:src=CP_EOP", ErrBadValue}, // no resolver
		{"iv.corrupt:n=1", ErrMissingKey},
		{"iv.corrupt:xor4=1", ErrUnknownKey},
		{"iv.corrupt:xor0=0x1ffffffff", ErrBadValue},
		{"dma.fail", ErrMissingKey},
		{"dma.fail:iova=0x2000-0x1000", ErrBadValue},
		{"dma.fail:iova=0x1000+0", ErrBadValue},
		{"dma.fail:iova=0xffffffffffffffff+2", ErrBadValue},
		{"dma.fail:iova=0x1000", ErrBadValue},
		{"dma.fail:iova=0x1000-0x2000,dir=sideways", ErrBadValue},
		{"queue.stall", ErrMissingKey},
		{"queue.stall:slot=1,doorbell=2", ErrConflict},
		{"queue.stall:slot=256", ErrBadValue},
		{"tlb.stale:vmid=16", ErrBadValue},
		{"mes.hang:op=0x100", ErrBadValue},
	} {
		_, err := Parse(tc.text+";", nil)
		if tc.text == "" {
			_, err = ParseRule(tc.text, nil)
		}
		var pe *ParseError
		if !errors.Is(err, tc.want) || !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want %v", tc.text, err, tc.want)
		}
	}
	if _, err := Parse(strings.Repeat("mes.hang;", MaxRules+1), nil); !errors.Is(err, ErrTooManyRules) {
		t.Errorf("%d rules: %v, want ErrTooManyRules", MaxRules+1, err)
	}
	if _, err := Parse(strings.Repeat(" ", MaxText+1), nil); !errors.Is(err, ErrTooLong) {
		t.Errorf("long text: %v, want ErrTooLong", err)
	}
}

func TestParseList(t *testing.T) {
	rules, err := Parse(" irq.drop:n=1; ;mes.hang:op=4 ;", nil)
	if err != nil || len(rules) != 2 || rules[0].Kind != IRQDrop || rules[1].Kind != MESHang {
		t.Fatalf("got %+v, %v", rules, err)
	}
	back, err := Parse(Format(rules), nil)
	if err != nil || len(back) != 2 || back[0] != rules[0] || back[1] != rules[1] {
		t.Fatalf("Format %q reads back as %+v, %v", Format(rules), back, err)
	}
	if r, err := Parse("", nil); err != nil || len(r) != 0 {
		t.Fatalf("empty text: %+v, %v", r, err)
	}
}
