package mes

import (
	"encoding/binary"
	"time"

	"vgpu/abi"
)

// eventLog is the driver's SET_LOG_BUFFER memory: a header record, then a ring of records
// (MES_EVT_*). Off while addr is 0.
type eventLog struct {
	addr, entries uint64
	n             uint64 // records written
}

// event appends a record. A write that fails turns logging off (and says so once): the
// scheduler never depends on the log.
func (a *activation) event(kind, reason uint32, slot int, prio uint32, doorbell uint32, rptr uint64, vmidPasid uint32) {
	a.traceEvent(kind, reason, slot, doorbell, rptr)
	l := &a.log
	if l.addr == 0 {
		return
	}
	r := a.evBuf[:abi.MES_EVENT_BYTES] // every field below is written
	if slot < 0 {
		slot = noSlot
	}
	put := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(r[dw*4:], v) }
	put(abi.MES_EVT_DW_KIND, kind&0xFF|reason&0xFF<<abi.MES_EVT_REASON__SHIFT|uint32(slot)&0xFF<<abi.MES_EVT_SLOT__SHIFT|
		prio<<abi.MES_EVT_PRIORITY__SHIFT&abi.MES_EVT_PRIORITY_MASK)
	put(abi.MES_EVT_DW_DOORBELL, doorbell)
	t := a.ns(time.Now())
	put(abi.MES_EVT_DW_TIME_LO, uint32(t))
	put(abi.MES_EVT_DW_TIME_HI, uint32(t>>32))
	put(abi.MES_EVT_DW_RPTR_LO, uint32(rptr))
	put(abi.MES_EVT_DW_RPTR_HI, uint32(rptr>>32))
	put(abi.MES_EVT_DW_VMID_PASID, vmidPasid)
	put(abi.MES_EVT_DW_SEQ, uint32(l.n))
	at := l.addr + (1+l.n%l.entries)*abi.MES_EVENT_BYTES
	hdr := a.evBuf[abi.MES_EVENT_BYTES:]
	binary.LittleEndian.PutUint32(hdr, uint32(l.n+1))
	if err := a.write(at, r); err != nil || a.write(l.addr, hdr) != nil {
		if err != errRevoked {
			a.m.limiter.Warn(logKeyLog, "mes: event log unwritable: logging off", "addr", l.addr, "err", err)
		}
		l.addr = 0
		return
	}
	l.n++
}
