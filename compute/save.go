package compute

import (
	"encoding/binary"
	"fmt"

	"vgpu/abi"
)

// Saved is a preempted dispatch: every workgroup before Next that is not in Groups has
// completed; Groups were in flight, with their work-items' states; Next and after are not
// started. Total, GroupItems and Stack are the dispatch's shape, checked on Resume.
type Saved struct {
	Next, Total       uint64
	GroupItems, Stack uint32
	Groups            []SavedGroup
}

// SavedGroup is one workgroup in flight.
type SavedGroup struct {
	Index uint64
	Items []SavedItem
}

// SavedItem is one work-item: everything a shader.Lane is.
type SavedItem struct {
	Regs    [11]uint64
	PC      uint32
	Kind    uint8 // abi.SHADER_ITEM_*
	SleepNS uint64
	Stack   []byte
}

// CSABytes is the size of the context save area of a Saved with groups workgroups of the
// given shape (the driver sizes the area for as many groups as there are CUs).
func CSABytes(groups, groupItems, stack int) int {
	return abi.SHADER_CSA_HEADER_BYTES + groups*(abi.SHADER_CSA_GROUP_BYTES+groupItems*(abi.SHADER_CSA_ITEM_BYTES+stack))
}

// Marshal encodes s in the context-save-area layout (abi.SHADER_CSA_*).
func (s *Saved) Marshal() []byte {
	b := make([]byte, CSABytes(len(s.Groups), int(s.GroupItems), int(s.Stack)))
	le := binary.LittleEndian
	le.PutUint32(b[0:], abi.SHADER_CSA_MAGIC)
	le.PutUint32(b[4:], abi.SHADER_CSA_VERSION)
	le.PutUint64(b[4*abi.SHADER_CSA_DW_NEXT:], s.Next)
	le.PutUint64(b[4*abi.SHADER_CSA_DW_TOTAL:], s.Total)
	le.PutUint32(b[4*abi.SHADER_CSA_DW_GROUPS:], uint32(len(s.Groups)))
	le.PutUint32(b[4*abi.SHADER_CSA_DW_GROUP_ITEMS:], s.GroupItems)
	le.PutUint32(b[4*abi.SHADER_CSA_DW_STACK:], s.Stack)
	o := abi.SHADER_CSA_HEADER_BYTES
	for _, g := range s.Groups {
		le.PutUint64(b[o:], g.Index)
		o += abi.SHADER_CSA_GROUP_BYTES
		for _, it := range g.Items {
			for r, v := range it.Regs {
				le.PutUint64(b[o+8*r:], v)
			}
			le.PutUint32(b[o+88:], it.PC)
			le.PutUint32(b[o+92:], uint32(it.Kind))
			le.PutUint64(b[o+96:], it.SleepNS)
			o += abi.SHADER_CSA_ITEM_BYTES
			copy(b[o:o+int(s.Stack)], it.Stack)
			o += int(s.Stack)
		}
	}
	return b
}

// UnmarshalSaved decodes a context save area. The area is guest memory: every field is
// checked against the layout (a corrupt area is an error, never a panic); what the dispatch
// must agree with is checked by Start (Dispatch.Resume).
func UnmarshalSaved(b []byte) (*Saved, error) {
	le := binary.LittleEndian
	if len(b) < abi.SHADER_CSA_HEADER_BYTES {
		return nil, fmt.Errorf("compute: context save area of %d bytes: no header", len(b))
	}
	if le.Uint32(b) != abi.SHADER_CSA_MAGIC || le.Uint32(b[4:]) != abi.SHADER_CSA_VERSION {
		return nil, fmt.Errorf("compute: context save area: bad magic or version")
	}
	for o := 4 * 9; o < abi.SHADER_CSA_HEADER_BYTES; o += 4 {
		if le.Uint32(b[o:]) != 0 {
			return nil, fmt.Errorf("compute: context save area: reserved header dword %d set", o/4)
		}
	}
	s := &Saved{Next: le.Uint64(b[4*abi.SHADER_CSA_DW_NEXT:]), Total: le.Uint64(b[4*abi.SHADER_CSA_DW_TOTAL:]),
		GroupItems: le.Uint32(b[4*abi.SHADER_CSA_DW_GROUP_ITEMS:]), Stack: le.Uint32(b[4*abi.SHADER_CSA_DW_STACK:])}
	groups := le.Uint32(b[4*abi.SHADER_CSA_DW_GROUPS:])
	if s.GroupItems == 0 || s.GroupItems > MaxGroupItems || s.Stack > abi.SHADER_STACK_MAX || s.Stack%8 != 0 {
		return nil, fmt.Errorf("compute: context save area: %d work-items of %d stack bytes", s.GroupItems, s.Stack)
	}
	if uint64(groups) > s.Total || len(b) < CSABytes(int(groups), int(s.GroupItems), int(s.Stack)) {
		return nil, fmt.Errorf("compute: context save area of %d bytes too small for %d workgroups", len(b), groups)
	}
	o := abi.SHADER_CSA_HEADER_BYTES
	s.Groups = make([]SavedGroup, groups)
	for gi := range s.Groups {
		g := &s.Groups[gi]
		g.Index = le.Uint64(b[o:])
		o += abi.SHADER_CSA_GROUP_BYTES
		g.Items = make([]SavedItem, s.GroupItems)
		for ii := range g.Items {
			it := &g.Items[ii]
			for r := range it.Regs {
				it.Regs[r] = le.Uint64(b[o+8*r:])
			}
			it.PC = le.Uint32(b[o+88:])
			kind := le.Uint32(b[o+92:])
			if kind > abi.SHADER_ITEM_EXITED {
				return nil, fmt.Errorf("compute: context save area: work-item %d of workgroup %d in state %d", ii, g.Index, kind)
			}
			it.Kind = uint8(kind)
			it.SleepNS = min(le.Uint64(b[o+96:]), abi.SHADER_HELPER_SLEEP_MAX)
			o += abi.SHADER_CSA_ITEM_BYTES
			it.Stack = append([]byte(nil), b[o:o+int(s.Stack)]...)
			o += int(s.Stack)
		}
	}
	return s, nil
}

// fits checks a Saved against the dispatch that resumes it: the same shape, workgroup
// indices before Next and each once, program counters on instructions, R10 at the stack top.
func (s *Saved) fits(d *Dispatch, total uint64, groupItems, stack int) error {
	if s.Total != total || int(s.GroupItems) != groupItems || int(s.Stack) != stack || s.Next > total {
		return fmt.Errorf("compute: resume of %d workgroups (next %d) of %d items with %d stack bytes into a dispatch of %d of %d with %d",
			s.Total, s.Next, s.GroupItems, s.Stack, total, groupItems, stack)
	}
	seen := make(map[uint64]bool, len(s.Groups))
	for _, g := range s.Groups {
		if g.Index >= s.Next || seen[g.Index] || len(g.Items) != groupItems {
			return fmt.Errorf("compute: resume: workgroup %d saved twice, not started or of the wrong size", g.Index)
		}
		seen[g.Index] = true
		for i, it := range g.Items {
			if !d.Program.Entry(int(it.PC)) || it.Regs[10] != abi.SHADER_STACK_TOP || len(it.Stack) != stack || it.Kind > abi.SHADER_ITEM_EXITED {
				return fmt.Errorf("compute: resume: work-item %d of workgroup %d: pc %d, R10 %#x, state %d", i, g.Index, it.PC, it.Regs[10], it.Kind)
			}
		}
	}
	return nil
}
