package inject

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/ratelog"
)

// ErrNoRule: Remove named a rule id the Set does not hold.
var ErrNoRule = errors.New("inject: no rule with that id")

// Set is the live rule set of one device. Its methods are safe for concurrent use; a nil *Set
// holds no rule.
type Set struct {
	// kinds has bit k set while a rule of Kind k is in the set: the hooks' one load.
	kinds atomic.Uint32
	rl    *ratelog.Limiter

	mu     sync.Mutex
	rules  []*live
	nextID int
	total  [NumKinds]uint64 // injections per kind, over the Set's life (Clear keeps them)
}

// live is a rule in a Set with its counters.
type live struct {
	Rule
	id          int
	added       time.Time
	seen, fired uint64
}

// Status is one rule of a Set as List reports it.
type Status struct {
	ID    int       `json:"id"`
	Rule  string    `json:"rule"`
	Added time.Time `json:"added"`
	Seen  uint64    `json:"seen"`  // events it matched
	Fired uint64    `json:"fired"` // injections it made
	Spent bool      `json:"spent"` // an N rule past its Nth event: it acts no more
}

// NewSet returns an empty set logging injections through rl (nil: not logged).
func NewSet(rl *ratelog.Limiter) *Set { return &Set{rl: rl} }

// Has reports whether a rule of kind k is in the set: one atomic load, for the hot paths.
func (s *Set) Has(k Kind) bool { return s != nil && s.kinds.Load()&(1<<k) != 0 }

// Kind sets for HasAny: the hooks of a part that serves several kinds.
const (
	IRQKinds = 1<<IRQDrop | 1<<IRQDelay
	IVKinds  = 1<<IVDrop | 1<<IVCorrupt
)

// HasAny reports whether a rule of any kind in mask (bit per Kind) is in the set.
func (s *Set) HasAny(mask uint32) bool { return s != nil && s.kinds.Load()&mask != 0 }

// Add puts rules into the set and returns their ids; past MaxRules nothing is added.
func (s *Set) Add(rules ...Rule) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rules)+len(rules) > MaxRules {
		return nil, fmt.Errorf("%w: %d held, %d more, at most %d", ErrTooManyRules, len(s.rules), len(rules), MaxRules)
	}
	ids := make([]int, len(rules))
	now := time.Now()
	for i, r := range rules {
		if r.Kind >= NumKinds {
			return nil, fmt.Errorf("%w: %d", ErrUnknownKind, r.Kind)
		}
		s.nextID++
		ids[i] = s.nextID
		s.rules = append(s.rules, &live{Rule: r, id: s.nextID, added: now})
	}
	s.publishLocked()
	return ids, nil
}

// Remove drops the rule with id.
func (s *Set) Remove(id int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.rules {
		if l.id == id {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
			s.publishLocked()
			return nil
		}
	}
	return fmt.Errorf("%w: %d", ErrNoRule, id)
}

// Clear drops every rule (the per-kind totals stay).
func (s *Set) Clear() {
	s.mu.Lock()
	s.rules = nil
	s.publishLocked()
	s.mu.Unlock()
}

// List returns the rules in the order they were added.
func (s *Set) List() []Status {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, len(s.rules))
	for i, l := range s.rules {
		out[i] = Status{ID: l.id, Rule: l.String(), Added: l.added, Seen: l.seen, Fired: l.fired, Spent: l.spent()}
	}
	return out
}

// Totals returns the injections made per kind since the Set was made.
func (s *Set) Totals() [NumKinds]uint64 {
	if s == nil {
		return [NumKinds]uint64{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (l *live) spent() bool { return l.N != Every && l.seen >= l.N }

// publishLocked recomputes the kinds bitmap. A spent rule still counts (List shows it) but no
// longer costs the hooks anything.
func (s *Set) publishLocked() {
	var m uint32
	for _, l := range s.rules {
		if !l.spent() {
			m |= 1 << l.Kind
		}
	}
	s.kinds.Store(m)
}

// fire runs the matching of one event: each live rule of kind k that match accepts counts the
// event, and the first that acts on it (its Nth, or every one) is returned, counted and
// logged with args. nil: no injection.
func (s *Set) fire(k Kind, match func(*Rule) bool, args ...any) *Rule {
	s.mu.Lock()
	var hit *live
	spent := false
	for _, l := range s.rules {
		if l.Kind != k || l.spent() || !match(&l.Rule) {
			continue
		}
		l.seen++
		if l.N == Every || l.seen == l.N {
			if hit == nil {
				hit = l
				l.fired++
				s.total[k]++
			}
			spent = spent || l.spent()
		}
	}
	if spent {
		s.publishLocked()
	}
	var r Rule
	var id int
	var fired uint64
	if hit != nil {
		r, id, fired = hit.Rule, hit.id, hit.fired
	}
	s.mu.Unlock()
	if hit == nil {
		return nil
	}
	s.rl.Warn("inject-"+k.String(), "inject: "+k.String(), append([]any{"rule", id, "fired", fired}, args...)...)
	return &r
}

// Interrupt is the MSI-X hook: drop the interrupt, or deliver it after delay (0: as usual).
func (s *Set) Interrupt(vector int) (drop bool, delay time.Duration) {
	m := func(r *Rule) bool { return r.Vector == Any || r.Vector == vector }
	if s.Has(IRQDrop) && s.fire(IRQDrop, m, "vector", vector) != nil {
		return true, 0
	}
	if s.Has(IRQDelay) {
		if r := s.fire(IRQDelay, m, "vector", vector); r != nil {
			return false, r.Delay
		}
	}
	return false, 0
}

// IVAction is what the IV hook does to one IV.
type IVAction struct {
	Drop      bool
	SetSource bool
	Source    uint8
	XOR       [4]uint32
}

// IV is the IH hook, called for each IV before it is written into the ring.
func (s *Set) IV(client, source uint8) (a IVAction) {
	m := func(r *Rule) bool {
		return (r.Client == Any || r.Client == int(client)) && (r.Source == Any || r.Source == int(source))
	}
	if s.Has(IVDrop) && s.fire(IVDrop, m, "client", hex(uint64(client)), "src", hex(uint64(source))) != nil {
		return IVAction{Drop: true}
	}
	if s.Has(IVCorrupt) {
		if r := s.fire(IVCorrupt, m, "client", hex(uint64(client)), "src", hex(uint64(source))); r != nil {
			a.XOR = r.XOR
			if r.NewSource != Any {
				a.SetSource, a.Source = true, uint8(r.NewSource)
			}
		}
	}
	return a
}

// DMA is the DMA hook: whether the access of n bytes at iova fails.
func (s *Set) DMA(iova uint64, n int, write bool) bool {
	if !s.Has(DMAFail) {
		return false
	}
	end := iova + uint64(n)
	if n == 0 || end < iova {
		end = iova + 1
	}
	return s.fire(DMAFail, func(r *Rule) bool {
		return iova < r.Hi && end > r.Lo && (r.Dir == DirAny || (r.Dir == DirWrite) == write)
	}, "iova", hex(iova), "len", n, "write", write) != nil
}

// Stall is the queue hook, asked when a queue is about to fetch: whether it stalls now (slot
// is its HQD slot, doorbell its doorbell dword index, or Any when it has none).
func (s *Set) Stall(slot, doorbell int) bool {
	return s.Has(QueueStall) && s.fire(QueueStall, func(r *Rule) bool {
		return r.Slot == slot || (r.Doorbell != Any && r.Doorbell == doorbell)
	}, "slot", slot, "doorbell", doorbell) != nil
}

// MESFrame is the scheduler hook, asked before a frame executes: whether it never completes.
func (s *Set) MESFrame(op uint32) bool {
	return s.Has(MESHang) && s.fire(MESHang, func(r *Rule) bool {
		return r.Op == Any || r.Op == int(op)
	}, "opcode", hex(uint64(op))) != nil
}

// Stale is the invalidation hook: whether this invalidation of vmid leaves its entries.
func (s *Set) Stale(vmid int) bool {
	return s.Has(TLBStale) && s.fire(TLBStale, func(r *Rule) bool {
		return r.VMID == Any || r.VMID == vmid
	}, "vmid", vmid) != nil
}

func hex(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }
