package gpuvm

import (
	"vgpu/abi"
	"vgpu/engine"
)

// cam is the retry CAM: one entry per faulting page with an IV outstanding. A fault on a page
// that has an entry waits on it without a new IV; when every entry is in use further faults
// wait, without an IV, until one is freed. Guarded by VM.mu.
type cam struct {
	e    [CAMEntries]camEntry
	used int
	full chan struct{} // closed (and dropped) when an entry is freed; nil: nobody waits
}

type camEntry struct {
	used bool
	vmid int
	page uint64
	ch   chan struct{}
}

// wait returns the channel a retry fault on (vmid, page) waits on, its CAM index (-1: the CAM
// is full) and whether the entry is new (the caller sends its IV).
func (c *cam) wait(vmid int, page uint64) (<-chan struct{}, int, bool) {
	free := -1
	for i := range c.e {
		e := &c.e[i]
		if e.used && e.vmid == vmid && e.page == page {
			return e.ch, i, false
		}
		if !e.used && free < 0 {
			free = i
		}
	}
	if free < 0 {
		if c.full == nil {
			c.full = make(chan struct{})
		}
		return c.full, -1, false
	}
	c.e[free] = camEntry{used: true, vmid: vmid, page: page, ch: make(chan struct{})}
	c.used++
	return c.e[free].ch, free, true
}

// release frees entry i and wakes its waiters and those waiting for a free entry.
func (c *cam) release(i int) {
	close(c.e[i].ch)
	c.e[i] = camEntry{}
	c.used--
	if c.full != nil {
		close(c.full)
		c.full = nil
	}
}

// releaseVMID frees every entry of vmid (its context was reprogrammed): the waiters replay.
func (c *cam) releaseVMID(vmid int) {
	for i := range c.e {
		if c.e[i].used && c.e[i].vmid == vmid {
			c.release(i)
		}
	}
}

func (c *cam) releaseAll() {
	for i := range c.e {
		if c.e[i].used {
			c.release(i)
		}
	}
	if c.full != nil {
		close(c.full)
		c.full = nil
	}
}

func (v *VM) retryFault(a engine.Access, va uint64, write bool, st uint32) error {
	v.mu.Lock()
	ch, idx, isNew := v.cam.wait(a.VMID, va>>pageShift)
	pasid := uint16(v.regs.pasid[a.VMID])
	v.mu.Unlock()
	v.stats.retryWaits.Add(1)
	if idx < 0 {
		v.stats.camFullWaits.Add(1)
	}
	if isNew {
		v.stats.retryIVs.Add(1)
		v.sendIV(faultIV(a, pasid, va, write, st, true, idx))
	}
	return &RetryFault{VA: va, VMID: a.VMID, Slot: a.Slot, Write: write, CAMIndex: idx, ready: ch}
}

// ackCAMLocked is a RETRY_CAM_ACK write (v.mu held); false: the entry was not in use.
func (v *VM) ackCAMLocked(i uint32) bool {
	if i >= CAMEntries || !v.cam.e[i].used {
		v.stats.bogusAcks.Add(1)
		return false
	}
	v.cam.release(int(i))
	return true
}

func (v *VM) camStatusLocked() uint32 {
	s := uint32(v.cam.used)<<abi.REG_VM_RETRY_CAM_STATUS__USED__SHIFT&abi.REG_VM_RETRY_CAM_STATUS__USED_MASK |
		uint32(CAMEntries)<<abi.REG_VM_RETRY_CAM_STATUS__SIZE__SHIFT&abi.REG_VM_RETRY_CAM_STATUS__SIZE_MASK
	if v.cam.full != nil {
		s |= abi.REG_VM_RETRY_CAM_STATUS__WAITING_FULL_MASK
	}
	return s
}
