package irq

import (
	"testing"
	"time"

	"vgpu/engine"
	"vgpu/inject"
)

func ruleSet(t *testing.T, text string) *inject.Set {
	t.Helper()
	rules, err := inject.Parse(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := inject.NewSet(nil)
	if _, err := s.Add(rules...); err != nil {
		t.Fatal(err)
	}
	return s
}

// The MSI-X rules on the controller: which triggers are signalled.
func TestInjectMSIX(t *testing.T) {
	for _, tc := range []struct {
		rules string
		steps []step
	}{
		{"irq.drop:n=2", []step{trigger(0), signals(map[string]uint64{"a": 1, "b": 0}),
			trigger(1), signals(map[string]uint64{"a": 0, "b": 0}),
			trigger(1, 0), signals(map[string]uint64{"a": 1, "b": 1})}},
		{"irq.drop:vector=1", []step{trigger(0, 1, 1, 0), signals(map[string]uint64{"a": 2, "b": 0})}},
		{"irq.delay:vector=1,for=20ms", []step{trigger(1, 0), signals(map[string]uint64{"a": 1}), eventually("b", 1)}},
		// A delay rule holds at most maxDelayed interrupts; the rest go at once.
		{"irq.delay:for=10s", []step{do(func(c *Controller) {
			for range maxDelayed + 5 {
				c.TriggerMSIX(0)
			}
		}), signals(map[string]uint64{"a": 5})}},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			e := newEnv(t, nVectors)
			e.c.SetInjector(ruleSet(t, tc.rules))
			set(assignFds, IndexMSIX, 0, 2, "a", "b")(e)
			for _, s := range tc.steps {
				s(e)
			}
		})
	}
}

// The IV rules on the IH: what reaches the ring.
func TestInjectIV(t *testing.T) {
	for _, tc := range []struct {
		rules string
		want  []engine.IV // what the ring holds after pushing 0xb5/1, 0xb5/2, 0xc3/3 (client 0x14)
	}{
		{"iv.drop:src=0xb5,n=1", []engine.IV{{Client: 0x14, Source: 0xb5, Data: [4]uint32{2}}, {Client: 0x14, Source: 0xc3, Data: [4]uint32{3}}}},
		{"iv.drop:client=0x14", nil},
		{"iv.corrupt:src=0xc3,new-src=0x7,xor3=0xf0", []engine.IV{{Client: 0x14, Source: 0xb5, Data: [4]uint32{1}},
			{Client: 0x14, Source: 0xb5, Data: [4]uint32{2}}, {Client: 0x14, Source: 0x7, Data: [4]uint32{3, 0, 0, 0xf0}}}},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			g := newRig(t, 10, cntlEnable|cntlWB)
			g.h.SetInjector(ruleSet(t, tc.rules))
			for i, src := range []uint8{0xb5, 0xb5, 0xc3} {
				g.h.Push(engine.IV{Client: 0x14, Source: src, Data: [4]uint32{uint32(i + 1)}})
			}
			deadline := time.Now().Add(5 * time.Second)
			for g.h.Stats().Entries < uint64(len(tc.want)) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			var got []engine.IV
			for i := range g.h.Stats().Entries {
				dw := g.m.entry(uint32(i) * 32)
				got = append(got, engine.IV{Client: uint8(dw[0]), Source: uint8(dw[0] >> 8), Data: [4]uint32{dw[4], dw[5], dw[6], dw[7]}})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d entries, want %d: %+v", len(got), len(tc.want), got)
			}
			for i := range got {
				if got[i].Client != tc.want[i].Client || got[i].Source != tc.want[i].Source || got[i].Data != tc.want[i].Data {
					t.Errorf("entry %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
