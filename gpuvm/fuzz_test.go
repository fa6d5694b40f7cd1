package gpuvm

import (
	"encoding/binary"
	"errors"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

const (
	fuzzPages   = 16 // VRAM pages holding tables (and data)
	fuzzEntries = 8  // entries per table taken from the input
	fuzzHeader  = 8
)

// FuzzWalker builds page tables from its input — 16 tables of 8 entries in VRAM, each entry
// either raw bytes or a plausible PDE/PTE pointing at one of the tables — and context
// registers, then runs translations, invalidations, CAM acks, table and register changes.
// It asserts: no panic, every Translate ends after a bounded number of table reads (a walk
// reads at most 4 entries; strict mode walks twice), every table read is one aligned 8-byte
// entry inside VRAM, every error is a *Fault or a *RetryFault, translations are non-empty,
// and the TLBs never exceed their capacity.
func FuzzWalker(f *testing.F) {
	seed := make([]byte, fuzzHeader+fuzzPages*fuzzEntries*8)
	seed[0] = 3 // depth 3
	seed[1] = 15
	for p := range fuzzPages {
		for i := range fuzzEntries {
			off := fuzzHeader + (p*fuzzEntries+i)*8
			seed[off] = 0x61 // VALID|READABLE|WRITEABLE
			seed[off+1] = byte((p + 1) % fuzzPages << 4)
		}
	}
	ops := []byte{0, 1, 2, 3, 4, 0, 0, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0, 3, 2, 0, 2, 3, 1, 6, 1, 1, 0, 7, 9, 9, 4, 1, 0}
	f.Add(append(append([]byte{}, seed...), ops...))
	s2 := append([]byte{}, seed...)
	s2[0], s2[2] = 0x1F, 0xFF // retry, strict, defaults
	f.Add(append(s2, ops...))
	f.Add([]byte{2, 3, 1, 2, 3, 4, 5, 6, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(fuzzWalker)
}

func fuzzWalker(t *testing.T, data []byte) {
	at := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	word := func(i int) uint64 {
		var b [8]byte
		for k := range b {
			b[k] = at(i + k)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	// plausible turns raw bits into an entry pointing at one of the tables, keeping the
	// flag bits the walker cares about; bit 63 of the raw word keeps it raw instead.
	plausible := func(raw uint64) uint64 {
		if raw>>63 != 0 {
			return raw
		}
		keep := raw & (0x7FF | abi.PDE_PTE_MASK | abi.PTE_PRT_MASK | abi.PTE_TF_MASK | abi.PTE_MTYPE_MASK)
		return keep | (raw>>8)%fuzzPages<<12
	}
	m := newMem(fuzzPages * pageSize)
	for p := range fuzzPages {
		for i := range fuzzEntries {
			m.put(vram(uint64(p*pageSize+i*8)), plausible(word(fuzzHeader+(p*fuzzEntries+i)*8)))
		}
	}
	v := New(Config{Tables: m, VRAMSize: fuzzPages * pageSize})
	ivs := 0
	v.SetIVSink(func(engine.IV) { ivs++ })
	h := at(0)
	c := uint32(abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK) | uint32(h&3)<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT |
		uint32(h>>2&1)<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE__SHIFT | allInterrupts
	if h&0x08 != 0 {
		c |= retryCntl
	}
	if h&0x10 != 0 {
		c |= abi.REG_VM_CONTEXT_CNTL__RETRY_OTHER_FAULT_MASK
	}
	if at(2)&1 != 0 {
		c |= allDefaults
	}
	root := plausible(uint64(at(1)) << 8)
	if at(1)&0x80 == 0 {
		root |= abi.PDE_VALID_MASK
	}
	for vmid := 1; vmid <= 2; vmid++ {
		v.WriteContext(vmid, ctxBaseLo, uint32(root))
		v.WriteContext(vmid, ctxBaseHi, uint32(root>>32))
		v.WriteContext(vmid, ctxStartLo, uint32(at(3)&1))
		v.WriteContext(vmid, ctxEndLo, 0xFFFFFFFF>>(at(4)&31))
		v.WriteContext(vmid, ctxEndHi, uint32(at(5)))
		v.WriteContext(vmid, ctxCntl, c)
	}
	v.WriteReg(regStrictCntl, uint32(at(2)>>1&1))
	if at(2)&4 != 0 {
		v.WriteReg(regDefaultLo, 3)
	}
	for k := fuzzHeader + fuzzPages*fuzzEntries*8; k+4 <= len(data) && k < 4096; k += 5 {
		op, b1, b2, b3, b4 := at(k), at(k+1), at(k+2), at(k+3), at(k+4)
		vmid := 1 + int(op>>7)
		switch op & 7 {
		case 0, 1, 2, 3: // translate
			va := uint64(b1&7)<<39 | uint64(b2&7)<<30 | uint64(b3&7)<<21 | uint64(b4&15)<<12 | uint64(b4)<<4&0xFF0
			if op&0x40 != 0 {
				va |= 0xFFFF_8000_0000_0000 // sign-extended, or not canonical when bit 47 is 0
			}
			kind := engine.Data
			if op&3 == 3 {
				kind = engine.Fetch
			}
			before := m.reads.Load()
			tr, err := v.Translate(engine.Access{VMID: vmid, Slot: int(b1 % 17), Kind: kind, Client: b2}, va, op&1 != 0)
			if n := m.reads.Load() - before; n > 8 {
				t.Fatalf("one translation read %d entries", n)
			}
			var fl *Fault
			var r *RetryFault
			switch {
			case err == nil:
				if tr.Len == 0 || tr.Len > vaLimit {
					t.Fatalf("translation of %#x has length %#x", va, tr.Len)
				}
			case errors.As(err, &fl):
				if fl.Status&causeMask == 0 {
					t.Fatalf("fault without a cause: %v", fl)
				}
			case errors.As(err, &r):
			default:
				t.Fatalf("unexpected error %v", err)
			}
		case 4: // invalidate
			v.WriteEngine(int(b1)%NumEngines, engReq, uint32(b2)<<1|uint32(b3)<<16)
		case 5: // ack a CAM entry, or clear the latch
			v.WriteReg(regCAMAck, uint32(b1%(CAMEntries+2)))
			v.WriteReg(regFaultCntl, uint32(b2&1))
		case 6: // the driver rewrites an entry
			m.put(vram(uint64(b1%fuzzPages)*pageSize+uint64(b2%fuzzEntries)*8), plausible(uint64(b3)<<56|uint64(b4)<<8|uint64(b4)))
		case 7: // reprogram
			v.WriteContext(vmid, ctxCntl, c^uint32(b1)<<1)
			v.WriteReg(regStrictCntl, uint32(b2&1))
		}
	}
	if m.bad.Load() != 0 {
		t.Fatalf("%d table reads out of bounds or misshapen", m.bad.Load())
	}
	for i := range v.ctx {
		if n := v.ctx[i].entries(); n > TLBEntries {
			t.Fatalf("vmid %d holds %d TLB entries", i, n)
		}
	}
	v.Reset()
	if v.ReadReg(regCAMStatus)&abi.REG_VM_RETRY_CAM_STATUS__USED_MASK != 0 {
		t.Fatal("CAM entries survive Reset")
	}
	_ = ivs
}
