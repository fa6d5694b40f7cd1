package inject

import (
	"strconv"
	"strings"
	"time"
)

// Kind is what a rule does.
type Kind uint8

// The kinds, by the device part they act on.
const (
	IRQDrop    Kind = iota // an MSI-X interrupt is not signalled
	IRQDelay               // an MSI-X interrupt is signalled after a delay
	IVDrop                 // an IV never reaches the IH ring
	IVCorrupt              // an IV reaches the IH ring with a wrong source id or payload
	DMAFail                // a DMA access to an IOVA range fails
	QueueStall             // a queue stops fetching, as if hung, until a reset
	MESHang                // an MES API frame never completes
	TLBStale               // an invalidation of a VMID is acknowledged but drops nothing
	NumKinds
)

var kindNames = [NumKinds]string{"irq.drop", "irq.delay", "iv.drop", "iv.corrupt", "dma.fail", "queue.stall", "mes.hang", "tlb.stale"}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "kind" + strconv.Itoa(int(k))
}

// Any is a filter that matches every value.
const Any = -1

// Every is Rule.N's value for "every matching event".
const Every = 0

// Dir is the direction a dma.fail rule matches.
type Dir uint8

const (
	DirAny Dir = iota
	DirRead
	DirWrite
)

var dirNames = [...]string{"any", "read", "write"}

// Limits on what a rule may ask for.
const (
	// MaxDelay bounds irq.delay: an interrupt that comes later than this is a dropped one.
	MaxDelay = 10 * time.Second
	// MaxRules bounds a Set (and one Parse).
	MaxRules = 64
	// MaxText bounds the text Parse accepts.
	MaxText = 4096
)

// Rule is one parsed rule. Filters hold Any when the rule names no value for them; only the
// fields of its Kind are used (Parse refuses keys a kind does not have).
type Rule struct {
	Kind Kind
	// N: the rule acts on the Nth event it matches only (1-based, counted from when the rule
	// was added); Every acts on each one.
	N uint64

	Vector int           // irq.*: the MSI-X vector
	Delay  time.Duration // irq.delay

	Client, Source int // iv.*: the IV's client and source id
	NewSource      int // iv.corrupt: the source id written instead (Any: unchanged)
	XOR            [4]uint32

	Lo, Hi uint64 // dma.fail: [Lo, Hi) of IOVA space (an access overlapping it fails)
	Dir    Dir

	Slot, Doorbell int // queue.stall: the HQD slot or the queue's doorbell (dword index)
	Op             int // mes.hang: the frame's opcode
	VMID           int // tlb.stale
}

// newRule is a rule of kind k with every filter open and its kind's default N.
func newRule(k Kind) Rule {
	r := Rule{Kind: k, Vector: Any, Client: Any, Source: Any, NewSource: Any, Slot: Any, Doorbell: Any, Op: Any, VMID: Any}
	switch k {
	case IVCorrupt, QueueStall, MESHang, TLBStale:
		r.N = 1 // "the next one": a rule that acts on every one would leave nothing to recover
	}
	return r
}

// String is the rule in the grammar, canonical (numbers in hex where they are addresses or
// ids); Parse(r.String()) gives r back.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Kind.String())
	sep := byte(':')
	put := func(k, v string) {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	num := func(k string, v int) {
		if v != Any {
			put(k, "0x"+strconv.FormatUint(uint64(v), 16))
		}
	}
	switch r.Kind {
	case IRQDrop, IRQDelay:
		num("vector", r.Vector)
		if r.Kind == IRQDelay {
			put("for", r.Delay.String())
		}
	case IVDrop, IVCorrupt:
		num("client", r.Client)
		num("src", r.Source)
		if r.Kind == IVCorrupt {
			num("new-src", r.NewSource)
			for i, x := range r.XOR {
				if x != 0 {
					put("xor"+strconv.Itoa(i), "0x"+strconv.FormatUint(uint64(x), 16))
				}
			}
		}
	case DMAFail:
		put("iova", "0x"+strconv.FormatUint(r.Lo, 16)+"-0x"+strconv.FormatUint(r.Hi, 16))
		if r.Dir != DirAny {
			put("dir", dirNames[r.Dir])
		}
	case QueueStall:
		num("slot", r.Slot)
		num("doorbell", r.Doorbell)
	case MESHang:
		num("op", r.Op)
	case TLBStale:
		num("vmid", r.VMID)
	}
	if r.N == Every {
		put("n", "every")
	} else {
		put("n", strconv.FormatUint(r.N, 10))
	}
	return b.String()
}

// Format joins rules as Parse reads them.
func Format(rules []Rule) string {
	s := make([]string, len(rules))
	for i, r := range rules {
		s[i] = r.String()
	}
	return strings.Join(s, "; ")
}
