package inject

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Parse errors. Parse returns a *ParseError wrapping one of them; errors.Is works through it.
var (
	ErrEmpty        = errors.New("inject: empty rule")
	ErrUnknownKind  = errors.New("inject: unknown rule kind")
	ErrUnknownKey   = errors.New("inject: key not known for this kind")
	ErrDuplicateKey = errors.New("inject: key given twice")
	ErrMissingKey   = errors.New("inject: required key missing")
	ErrConflict     = errors.New("inject: keys that exclude each other")
	ErrBadValue     = errors.New("inject: bad value")
	ErrTooLong      = errors.New("inject: rule text too long")
	ErrTooManyRules = errors.New("inject: too many rules")
)

// ParseError says which rule (and key) of the text was refused.
type ParseError struct {
	Rule string // the rule's text
	Key  string // the key at fault, if any
	Err  error  // one of the sentinels
	Why  string // detail
}

func (e *ParseError) Error() string {
	s := fmt.Sprintf("%v in %q", e.Err, e.Rule)
	if e.Key != "" {
		s += " (" + e.Key + ")"
	}
	if e.Why != "" {
		s += ": " + e.Why
	}
	return s
}

func (e *ParseError) Unwrap() error { return e.Err }

// Resolver turns a name given for a key into its number (an IV source "CP_EOP" for src, an
// MES opcode "ADD_QUEUE" for op); ok false: not a name it knows. Parse uses it for client, src,
// new-src and op when the value is not a number.
type Resolver func(key, name string) (v int, ok bool)

// keys of each kind; required ones are marked by the parser below.
var kindKeys = [NumKinds][]string{
	IRQDrop:    {"vector", "n"},
	IRQDelay:   {"vector", "n", "for"},
	IVDrop:     {"client", "src", "n"},
	IVCorrupt:  {"client", "src", "n", "new-src", "xor0", "xor1", "xor2", "xor3"},
	DMAFail:    {"iova", "dir", "n"},
	QueueStall: {"slot", "doorbell", "n"},
	MESHang:    {"op", "n"},
	TLBStale:   {"vmid", "n"},
}

// Parse reads a ';'-separated list of rules (empty items are skipped; the empty text is no
// rule). names may be nil.
func Parse(text string, names Resolver) ([]Rule, error) {
	if len(text) > MaxText {
		return nil, &ParseError{Rule: text[:32] + "...", Err: ErrTooLong, Why: fmt.Sprintf("%d bytes, at most %d", len(text), MaxText)}
	}
	var out []Rule
	for _, item := range strings.Split(text, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if len(out) == MaxRules {
			return nil, &ParseError{Rule: item, Err: ErrTooManyRules, Why: fmt.Sprintf("at most %d", MaxRules)}
		}
		r, err := ParseRule(item, names)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRule reads one rule: KIND[:KEY=VALUE{,KEY=VALUE}].
func ParseRule(text string, names Resolver) (Rule, error) {
	text = strings.TrimSpace(text)
	bad := func(key string, err error, why string, args ...any) (Rule, error) {
		return Rule{}, &ParseError{Rule: text, Key: key, Err: err, Why: fmt.Sprintf(why, args...)}
	}
	if len(text) > MaxText {
		return bad("", ErrTooLong, "%d bytes", len(text))
	}
	if text == "" {
		return bad("", ErrEmpty, "")
	}
	kindText, params, _ := strings.Cut(text, ":")
	kindText = strings.TrimSpace(kindText)
	kind := NumKinds
	for k, n := range kindNames {
		if n == kindText {
			kind = Kind(k)
		}
	}
	if kind == NumKinds {
		return bad("", ErrUnknownKind, "%q (known: %s)", kindText, strings.Join(kindNames[:], ", "))
	}
	r := newRule(kind)
	seen := map[string]bool{}
	if strings.TrimSpace(params) != "" {
		for _, kv := range strings.Split(params, ",") {
			key, val, hasVal := strings.Cut(strings.TrimSpace(kv), "=")
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			if !known(kind, key) {
				return bad(key, ErrUnknownKey, "%s takes %s", kind, strings.Join(kindKeys[kind], ", "))
			}
			if seen[key] {
				return bad(key, ErrDuplicateKey, "")
			}
			seen[key] = true
			if !hasVal || val == "" {
				return bad(key, ErrBadValue, "no value")
			}
			if err := r.set(key, val, names); err != nil {
				return bad(key, ErrBadValue, "%q: %v", val, err)
			}
		}
	}
	switch {
	case kind == IRQDelay && !seen["for"]:
		return bad("for", ErrMissingKey, "irq.delay needs for=DURATION")
	case kind == DMAFail && !seen["iova"]:
		return bad("iova", ErrMissingKey, "dma.fail needs iova=START-END or iova=START+LENGTH")
	case kind == QueueStall && seen["slot"] == seen["doorbell"]:
		if seen["slot"] {
			return bad("doorbell", ErrConflict, "give slot or doorbell, not both")
		}
		return bad("slot", ErrMissingKey, "queue.stall needs slot=S or doorbell=D")
	case kind == IVCorrupt && r.NewSource == Any && r.XOR == [4]uint32{}:
		return bad("new-src", ErrMissingKey, "iv.corrupt needs new-src=S or a non-zero xorK=MASK")
	}
	return r, nil
}

func known(k Kind, key string) bool {
	for _, s := range kindKeys[k] {
		if s == key {
			return true
		}
	}
	return false
}

// set stores one parameter.
func (r *Rule) set(key, val string, names Resolver) error {
	var err error
	switch key {
	case "n":
		if val == "every" {
			r.N = Every
			return nil
		}
		var n uint64
		if n, err = strconv.ParseUint(val, 0, 64); err == nil && (n == 0 || n > math.MaxInt64) {
			err = errors.New("want 1.. or every")
		}
		r.N = n
	case "vector":
		r.Vector, err = number(val, 2047, key, nil)
	case "for":
		var d time.Duration
		if d, err = time.ParseDuration(val); err == nil && (d <= 0 || d > MaxDelay) {
			err = fmt.Errorf("want 0 < duration <= %v", MaxDelay)
		}
		r.Delay = d
	case "client":
		r.Client, err = number(val, 255, key, names)
	case "src":
		r.Source, err = number(val, 255, key, names)
	case "new-src":
		r.NewSource, err = number(val, 255, key, names)
	case "xor0", "xor1", "xor2", "xor3":
		var x uint64
		x, err = strconv.ParseUint(val, 0, 32)
		r.XOR[key[3]-'0'] = uint32(x)
	case "iova":
		r.Lo, r.Hi, err = iovaRange(val)
	case "dir":
		switch val {
		case "any":
			r.Dir = DirAny
		case "read":
			r.Dir = DirRead
		case "write":
			r.Dir = DirWrite
		default:
			err = errors.New("want read, write or any")
		}
	case "slot":
		r.Slot, err = number(val, 255, key, nil)
	case "doorbell":
		r.Doorbell, err = number(val, 1<<20-1, key, nil)
	case "op":
		r.Op, err = number(val, 255, key, names)
	case "vmid":
		r.VMID, err = number(val, 15, key, nil)
	}
	return err
}

// number reads a value 0..max: a number (0x, 0o, 0b prefixes work), else a name names knows.
func number(val string, max int, key string, names Resolver) (int, error) {
	v, err := strconv.ParseUint(val, 0, 32)
	if err != nil {
		if names != nil {
			if n, ok := names(key, val); ok && n >= 0 && n <= max {
				return n, nil
			}
		}
		return 0, errors.New("not a number or a known name")
	}
	if v > uint64(max) {
		return 0, fmt.Errorf("above %d", max)
	}
	return int(v), nil
}

// iovaRange reads START-END (END exclusive) or START+LENGTH.
func iovaRange(val string) (lo, hi uint64, err error) {
	a, b, plus := strings.Cut(val, "+")
	if !plus {
		if a, b, _ = strings.Cut(val, "-"); b == "" {
			return 0, 0, errors.New("want START-END or START+LENGTH")
		}
	}
	if lo, err = strconv.ParseUint(strings.TrimSpace(a), 0, 64); err != nil {
		return 0, 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(b), 0, 64)
	if err != nil {
		return 0, 0, err
	}
	if plus {
		if v == 0 || lo+v < lo {
			return 0, 0, errors.New("length 0 or past the end of the address space")
		}
		return lo, lo + v, nil
	}
	if v <= lo {
		return 0, 0, errors.New("END not above START")
	}
	return lo, v, nil
}
