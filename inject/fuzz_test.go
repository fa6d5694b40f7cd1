package inject

import (
	"errors"
	"testing"
)

// FuzzParse: any text parses to rules or a *ParseError, never panics, and what parses prints
// to a canonical form that reads back to the same rules.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"irq.drop:vector=0,n=2", "irq.delay:for=1s", "iv.drop:src=0xb5,n=1", "iv.corrupt:new-src=1,xor3=5",
		"dma.fail:iova=0x1000+0x1000,dir=read", "queue.stall:slot=1", "queue.stall:doorbell=0x400",
		"mes.hang:op=4", "tlb.stale:vmid=1,n=every", "a;b;;", "dma.fail:iova=1-", ":", "irq.drop:,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		rules, err := Parse(text, nil)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %v is not a *ParseError", text, err)
			}
			return
		}
		back, err := Parse(Format(rules), nil)
		if err != nil || len(back) != len(rules) {
			t.Fatalf("%q: Format %q: %v", text, Format(rules), err)
		}
		for i := range rules {
			if back[i] != rules[i] {
				t.Fatalf("%q: rule %d %+v reads back as %+v", text, i, rules[i], back[i])
			}
		}
	})
}
