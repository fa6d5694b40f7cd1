package mes

import (
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/cp"
)

// The scheduler's tables in a snapshot: its processes, gangs and queues as the firmware
// goroutine keeps them, read while it is parked (Pause) and rebuilt into a new activation
// before its goroutine starts. A queue is its ADD_QUEUE links (MQD, wptr shadow, unmap flag,
// its record in the gang context), where it is (unmapped, mapped or hung in a slot, halted),
// its pointers, the MQD's HQD image as last loaded and the execution image a map continues
// from: the MQD and the gang context themselves are guest memory. A mapped queue's live
// state is its HQD slot's (cp.SlotState.Mapped); the table records which slot it holds.
// Times (since a queue was mapped, first ran, went idle; since a process got its VMID) are
// saved as ages, so the quanta and graces go on from where they were.

// Tables is the scheduler's bookkeeping. Indexes link the records: a gang names its process
// by its index in Procs, a queue its gang by its index in Gangs; Queues is in the order they
// were added (the scheduler's scans go in this order).
type Tables struct {
	Procs  []ProcRecord
	Gangs  []GangRecord
	Queues []QueueRecord
}

// ProcRecord is one process.
type ProcRecord struct {
	Ctx                     uint64 // process context address: its identity
	PASID                   uint16
	PageTableBase           uint64
	Cntl                    uint32
	Start, End              uint64
	QuantumNs               int64
	VMID                    uint32 // 0: none now
	VMIDAgeNs, LastMapAgeNs int64  // since it got VMID / one of its queues was last mapped; -1: never
	VMIDAsked               bool
}

// GangRecord is one gang.
type GangRecord struct {
	Ctx           uint64
	Proc          uint32 // index in Tables.Procs
	Level, Inproc uint32
	QuantumNs     int64
	Suspended     bool
}

// Queue states in QueueRecord.State.
const (
	QueueUnmapped = uint8(qUnmapped)
	QueueMapped   = uint8(qMapped)
	QueueHung     = uint8(qHung) // did not stop within its grace: keeps its slot until RESET
	QueueHalted   = uint8(qHalted)
)

// QueueRecord is one queue: its fixed-size fields, and its image's saved shader dispatches.
type QueueRecord struct {
	QueueFields
	Dispatches []DispatchRecord
}

// QueueFields is a queue's fixed-size part.
type QueueFields struct {
	Doorbell                         uint32
	Gang                             uint32 // index in Tables.Gangs
	Ctx, MQD, WptrAddr, UnmapFlag    uint64
	Type                             uint32
	State                            uint8
	Slot                             int32 // the HQD slot it holds (mapped, hung); -1 otherwise
	MappedAgeNs, RanAgeNs, IdleAgeNs int64 // -1: not set
	PreemptReason                    uint32
	Rptr, Wptr, LastDB               uint64
	Maps, Preempts                   uint32
	Loaded                           bool
	ErrCode                          uint32
	HQD                              [hqdBytes]byte
	Image                            ImageRecord
}

// ImageRecord is a cp.Image without its dispatches, in fixed-size fields.
type ImageRecord struct {
	VMID             uint32
	Base             uint64
	Control          uint32
	ReportAddr       uint64
	DoorbellControl  uint32
	FenceAddr        uint64
	DoorbellOffset   uint32
	Rptr, Wptr       uint64
	Priority         uint8
	CSABase, CSASize uint64
	Error            uint32
	ErrorAddr        uint64
	Level, IBCount   uint32
	IB               [cp.IBMaxDepth]IBRecord
	UserData         [abi.SH_COMPUTE_USER_DATA_COUNT]uint32
	Progress         uint64
	WaitWritten      bool
	Fence            uint64
}

// IBRecord is a cp.IBState.
type IBRecord struct {
	Base, Size, Pos uint64
	VMID            uint32
}

// DispatchRecord is a cp.SavedDispatch.
type DispatchRecord struct {
	Program                  uint64
	Slots                    uint32
	CodeHash                 [32]byte
	NoHash                   bool
	Groups, GroupSize, Start [3]uint32
	Stack                    uint32
	Args                     uint64
	VMID                     uint32
	CSAOffset, CSABytes      uint64
}

func imageRecord(img *cp.Image) (ImageRecord, []DispatchRecord) {
	e := &img.Exec
	r := ImageRecord{VMID: uint32(img.VMID), Base: img.Base, Control: img.Control, ReportAddr: img.ReportAddr,
		DoorbellControl: img.DoorbellControl, FenceAddr: img.FenceAddr, DoorbellOffset: img.DoorbellOffset,
		Rptr: img.Rptr, Wptr: img.Wptr, Priority: img.Priority, CSABase: img.CSABase, CSASize: img.CSASize,
		Error: img.Error, ErrorAddr: img.ErrorAddr, Level: uint32(e.Level), IBCount: uint32(e.IBCount),
		UserData: e.UserData, Progress: e.Progress, WaitWritten: e.WaitWritten, Fence: e.Fence}
	for i, ib := range e.IB {
		r.IB[i] = IBRecord{Base: ib.Base, Size: ib.Size, Pos: ib.Pos, VMID: uint32(ib.VMID)}
	}
	var ds []DispatchRecord
	for _, d := range e.Dispatches {
		ds = append(ds, DispatchRecord{Program: d.Program, Slots: d.Slots, CodeHash: d.CodeHash, NoHash: d.NoHash,
			Groups: d.Groups, GroupSize: d.GroupSize, Start: d.Start, Stack: d.Stack, Args: d.Args,
			VMID: uint32(d.VMID), CSAOffset: d.CSAOffset, CSABytes: d.CSABytes})
	}
	return r, ds
}

// image converts back; the fields were checked (checkQueue): every int fits.
func (r *ImageRecord) image(ds []DispatchRecord) cp.Image {
	img := cp.Image{VMID: int(r.VMID), Base: r.Base, Control: r.Control, ReportAddr: r.ReportAddr,
		DoorbellControl: r.DoorbellControl, FenceAddr: r.FenceAddr, DoorbellOffset: r.DoorbellOffset,
		Rptr: r.Rptr, Wptr: r.Wptr, Priority: r.Priority, CSABase: r.CSABase, CSASize: r.CSASize,
		Error: r.Error, ErrorAddr: r.ErrorAddr}
	e := &img.Exec
	e.Level, e.IBCount, e.UserData = int(r.Level), int(r.IBCount), r.UserData
	e.Progress, e.WaitWritten, e.Fence = r.Progress, r.WaitWritten, r.Fence
	for i, ib := range r.IB {
		e.IB[i] = cp.IBState{Base: ib.Base, Size: ib.Size, Pos: ib.Pos, VMID: int(ib.VMID)}
	}
	for _, d := range ds {
		e.Dispatches = append(e.Dispatches, cp.SavedDispatch{Program: d.Program, Slots: d.Slots, CodeHash: d.CodeHash,
			NoHash: d.NoHash, Groups: d.Groups, GroupSize: d.GroupSize, Start: d.Start, Stack: d.Stack, Args: d.Args,
			VMID: int(d.VMID), CSAOffset: d.CSAOffset, CSABytes: d.CSABytes})
	}
	return img
}

// age is now - t in nanoseconds, -1 for a zero t.
func age(now, t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return int64(max(now.Sub(t), 0))
}

// since is age's inverse.
func since(now time.Time, ns int64) time.Time {
	if ns < 0 {
		return time.Time{}
	}
	return now.Add(-time.Duration(ns))
}

// saveTables reads the tables (the goroutine is parked). A queue being preempted is not at a
// resting point (its slot's queue has been asked to stop): ErrPause, try again.
func (a *activation) saveTables(now time.Time) (Tables, error) {
	var t Tables
	procIdx, gangIdx := map[*process]uint32{}, map[*gang]uint32{}
	for _, q := range a.t.order {
		if q.state == qPreempting {
			return Tables{}, fmt.Errorf("%w: queue %#x is leaving slot %d", ErrPause, q.doorbell, q.slot)
		}
		g, p := q.gang, q.gang.proc
		if _, ok := procIdx[p]; !ok {
			procIdx[p] = uint32(len(t.Procs))
			t.Procs = append(t.Procs, ProcRecord{Ctx: p.ctxAddr, PASID: p.vm.PASID, PageTableBase: p.vm.PageTableBase,
				Cntl: p.vm.Cntl, Start: p.vm.Start, End: p.vm.End, QuantumNs: int64(p.quantum), VMID: uint32(p.vmid),
				VMIDAgeNs: age(now, p.vmidSince), LastMapAgeNs: age(now, p.lastMap), VMIDAsked: p.vmidAsked})
		}
		if _, ok := gangIdx[g]; !ok {
			gangIdx[g] = uint32(len(t.Gangs))
			t.Gangs = append(t.Gangs, GangRecord{Ctx: g.ctxAddr, Proc: procIdx[p], Level: g.level, Inproc: g.inproc,
				QuantumNs: int64(g.quantum), Suspended: g.suspended})
		}
		r := QueueRecord{QueueFields: QueueFields{Doorbell: q.doorbell, Gang: gangIdx[g], Ctx: q.ctx, MQD: q.mqd, WptrAddr: q.wptrAddr,
			UnmapFlag: q.unmapFlag, Type: q.qtype, State: uint8(q.state), Slot: -1,
			MappedAgeNs: age(now, q.mappedAt), RanAgeNs: age(now, q.ranSince), IdleAgeNs: age(now, q.idleSince),
			PreemptReason: q.preemptReason, Rptr: q.rptr, Wptr: q.wptr, LastDB: q.lastDB.Load(),
			Maps: q.maps.Load(), Preempts: q.preempts.Load(), Loaded: q.loaded, ErrCode: q.errCode}}
		if q.occupies() {
			r.Slot = int32(q.slot)
		}
		copy(r.HQD[:], q.hqd)
		r.Image, r.Dispatches = imageRecord(&q.img)
		t.Queues = append(t.Queues, r)
	}
	return t, nil
}

// checkTables bounds everything a restore builds from t (user input): counts, links, the
// ADD_QUEUE rules (doorbells, alignment, priority levels, types), VMIDs and slots the saved
// SET_HW_RESOURCES gave, one queue per slot, one holder per VMID.
func (a *activation) checkTables(t *Tables, hw *hwState) error {
	switch {
	case len(t.Queues) > abi.MES_MAX_QUEUES || len(t.Procs) > len(t.Queues) || len(t.Gangs) > len(t.Queues):
		return badState("%d processes, %d gangs, %d queues (at most %d queues, no process or gang without one)",
			len(t.Procs), len(t.Gangs), len(t.Queues), abi.MES_MAX_QUEUES)
	case len(t.Queues) != 0 && hw == nil:
		return badState("queues without SET_HW_RESOURCES")
	}
	procCtx, vmids := map[uint64]bool{}, map[uint32]bool{}
	for i, p := range t.Procs {
		switch {
		case p.Ctx == 0 || p.Ctx%256 != 0 || procCtx[p.Ctx]:
			return badState("process %d: context %#x (256-byte aligned, one per process)", i, p.Ctx)
		case p.Start > p.End || p.End >= 1<<(abi.GPU_VA_BITS-12):
			return badState("process %d: VA pages %#x..%#x", i, p.Start, p.End)
		case p.QuantumNs < 0 || p.VMIDAgeNs < -1 || p.LastMapAgeNs < -1:
			return badState("process %d: negative quantum or age", i)
		case p.VMID != 0 && (p.VMID >= 16 || hw.vmids&(1<<p.VMID) == 0 || vmids[p.VMID]):
			return badState("process %d: VMID %d not one of the scheduler's %#x, or held twice", i, p.VMID, hw.vmids)
		}
		procCtx[p.Ctx] = true
		if p.VMID != 0 {
			vmids[p.VMID] = true
		}
	}
	gangCtx := map[uint64]bool{}
	for i, g := range t.Gangs {
		switch {
		case g.Ctx == 0 || g.Ctx%256 != 0 || gangCtx[g.Ctx]:
			return badState("gang %d: context %#x (256-byte aligned, one per gang)", i, g.Ctx)
		case g.Proc >= uint32(len(t.Procs)):
			return badState("gang %d: process %d of %d", i, g.Proc, len(t.Procs))
		case g.Level >= abi.MES_PRIORITY_LEVELS || g.QuantumNs < 0:
			return badState("gang %d: level %d, quantum %d ns", i, g.Level, g.QuantumNs)
		}
		gangCtx[g.Ctx] = true
	}
	doorbells, slots := map[uint32]bool{}, map[int32]bool{}
	perGang, perProc := make([]int, len(t.Gangs)), make([]int, len(t.Procs))
	ctxs := map[uint64]bool{}
	for i := range t.Queues {
		q := &t.Queues[i]
		if err := a.checkQueue(q, t, hw); err != nil {
			return fmt.Errorf("queue %d (doorbell %#x): %w", i, q.Doorbell, err)
		}
		if doorbells[q.Doorbell] || ctxs[q.Ctx] {
			return badState("queue %d: doorbell %#x or context record %#x used twice", i, q.Doorbell, q.Ctx)
		}
		doorbells[q.Doorbell], ctxs[q.Ctx] = true, true
		if q.Slot >= 0 {
			if slots[q.Slot] {
				return badState("queue %d: slot %d holds another queue", i, q.Slot)
			}
			slots[q.Slot] = true
		}
		perGang[q.Gang]++
		perProc[t.Gangs[q.Gang].Proc]++
	}
	for i, n := range perGang {
		if n == 0 || n > 8 {
			return badState("gang %d has %d queues (1..8)", i, n)
		}
	}
	for i, n := range perProc {
		if n == 0 {
			return badState("process %d has no queue", i)
		}
	}
	return nil
}

// checkQueue checks one queue record (its gang index first: the rest uses it).
func (a *activation) checkQueue(q *QueueRecord, t *Tables, hw *hwState) error {
	if q.Gang >= uint32(len(t.Gangs)) {
		return badState("gang %d of %d", q.Gang, len(t.Gangs))
	}
	g := &t.Gangs[q.Gang]
	occupies := q.State == QueueMapped || q.State == QueueHung
	switch {
	case q.State != QueueUnmapped && !occupies && q.State != QueueHalted:
		return badState("state %d", q.State)
	case occupies != (q.Slot >= 0) || q.Slot >= numSlots || q.Slot < -1:
		return badState("state %d in slot %d", q.State, q.Slot)
	case occupies && hw.owned&(1<<q.Slot) == 0:
		return badState("slot %d is not the scheduler's (%#x)", q.Slot, hw.owned)
	case occupies && slotType(int(q.Slot)) != q.Type:
		return badState("a type %d queue in slot %d", q.Type, q.Slot)
	case occupies && t.Procs[g.Proc].VMID == 0:
		return badState("in slot %d without a VMID", q.Slot)
	case q.Type != abi.MES_QUEUE_TYPE_GFX && q.Type != abi.MES_QUEUE_TYPE_COMPUTE:
		return badState("queue type %d", q.Type)
	case q.Type == abi.MES_QUEUE_TYPE_GFX && hw.owned&1 == 0 || q.Type == abi.MES_QUEUE_TYPE_COMPUTE && hw.owned&^1 == 0:
		return badState("a type %d queue without a slot of its type (%#x)", q.Type, hw.owned)
	case q.MQD == 0 || q.MQD%256 != 0 || q.WptrAddr%8 != 0 || q.UnmapFlag%4 != 0:
		return badState("MQD %#x, wptr shadow %#x, unmap flag %#x misaligned", q.MQD, q.WptrAddr, q.UnmapFlag)
	case q.Ctx < g.Ctx || q.Ctx >= g.Ctx+8*abi.MES_CTX_BYTES || (q.Ctx-g.Ctx)%abi.MES_CTX_BYTES != 0:
		return badState("context record %#x outside its gang's page %#x", q.Ctx, g.Ctx)
	case q.MappedAgeNs < -1 || q.RanAgeNs < -1 || q.IdleAgeNs < -1:
		return badState("negative age")
	case q.ErrCode > 0xFF || q.State != QueueHalted && q.ErrCode != 0:
		return badState("error %d in state %d", q.ErrCode, q.State)
	case len(q.Dispatches) > cp.MaxSavedDispatches:
		return badState("%d saved dispatches (at most %d)", len(q.Dispatches), cp.MaxSavedDispatches)
	}
	if why := a.checkDoorbellSaved(q.Doorbell, hw); why != "" {
		return badState("doorbell %#x: %s", q.Doorbell, why)
	}
	im := &q.Image
	ring := uint64(1) << (min(im.Control&abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK>>abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT,
		abi.CP_QUEUE_SIZE_MAX) + 1)
	switch {
	case q.Wptr < q.Rptr || q.Wptr-q.Rptr > ring:
		return badState("wptr %d not in [rptr %d, rptr + ring size %d]", q.Wptr, q.Rptr, ring)
	case im.VMID > 15 || im.Level > cp.IBMaxDepth || im.IBCount > 1<<20 || im.Priority >= abi.MES_PRIORITY_LEVELS:
		return badState("image VMID %d, IB level %d, IB count %d, priority %d", im.VMID, im.Level, im.IBCount, im.Priority)
	case im.IB[0].VMID > 15 || im.IB[1].VMID > 15:
		return badState("IB VMID beyond 15")
	}
	for i, d := range q.Dispatches {
		if d.VMID > 15 {
			return badState("saved dispatch %d: VMID %d", i, d.VMID)
		}
	}
	return nil
}

// checkDoorbellSaved is checkDoorbell for a restore: the kernel queues' doorbells are not
// asked about (the register lock is held), the rest is the same.
func (a *activation) checkDoorbellSaved(dword uint32, hw *hwState) string {
	switch {
	case int(dword) >= 2*a.m.cfg.Doorbells:
		return "outside the doorbell BAR"
	case dword%2 != 0:
		return "not a 64-bit doorbell (an odd dword offset)"
	case a.ring.doorbell&abi.REG_MES_RING_DOORBELL__EN_MASK != 0 &&
		dword == a.ring.doorbell&abi.REG_MES_RING_DOORBELL__OFFSET_MASK>>abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT:
		return "the MES ring's own doorbell"
	}
	for _, db := range hw.aggregated {
		if db != 0 && db == dword {
			return "an aggregated doorbell"
		}
	}
	return ""
}

// restoreTables builds the checked tables into a (before its goroutine starts). The slots'
// queues are the CP's (restored before the scheduler): the first pass observes them.
func (a *activation) restoreTables(t *Tables, now time.Time) {
	procs := make([]*process, len(t.Procs))
	for i, r := range t.Procs {
		p := &process{ctxAddr: r.Ctx, vm: VMContext{PASID: r.PASID, PageTableBase: r.PageTableBase, Cntl: r.Cntl,
			Start: r.Start, End: r.End}, quantum: time.Duration(r.QuantumNs), vmid: int(r.VMID),
			vmidSince: since(now, r.VMIDAgeNs), lastMap: since(now, r.LastMapAgeNs), vmidAsked: r.VMIDAsked}
		procs[i] = p
		a.t.procs[p.ctxAddr] = p
		if p.vmid != 0 {
			a.vmids[p.vmid] = p
		}
	}
	gangs := make([]*gang, len(t.Gangs))
	for i, r := range t.Gangs {
		g := &gang{ctxAddr: r.Ctx, proc: procs[r.Proc], level: r.Level, inproc: r.Inproc,
			quantum: time.Duration(r.QuantumNs), suspended: r.Suspended}
		gangs[i] = g
		a.t.gangs[g.ctxAddr] = g
	}
	for i := range t.Queues {
		r := &t.Queues[i]
		g := gangs[r.Gang]
		q := &queue{doorbell: r.Doorbell, gang: g, ctx: r.Ctx, mqd: r.MQD, wptrAddr: r.WptrAddr, unmapFlag: r.UnmapFlag,
			qtype: r.Type, state: qstate(r.State), slot: int(r.Slot), mappedAt: since(now, r.MappedAgeNs),
			ranSince: since(now, r.RanAgeNs), idleSince: since(now, r.IdleAgeNs), preemptReason: r.PreemptReason,
			rptr: r.Rptr, wptr: r.Wptr, img: r.Image.image(r.Dispatches), hqd: append([]byte(nil), r.HQD[:]...),
			loaded: r.Loaded, errCode: r.ErrCode}
		q.lastDB.Store(r.LastDB)
		q.maps.Store(r.Maps)
		q.preempts.Store(r.Preempts)
		g.queues = append(g.queues, q)
		g.proc.queues++
		if q.occupies() {
			q.inSlot.Store(true)
			a.slots[q.slot] = q
			g.proc.inSlots++
			a.nMapped.Add(1)
			if q.state == qHung {
				a.nHung.Add(1)
				q.preemptReq, q.preemptAt = now, now
			}
		}
		a.t.queues[q.doorbell] = q
		a.t.order = append(a.t.order, q)
	}
	for _, q := range a.t.order {
		q.publishIdent()
		q.publish()
	}
	a.publishTable()
	a.rescan = true
}

// checkSlots compares the tables with the CP (restored first): every queue the tables put in
// a slot runs there as a mapped queue, and no other slot of the scheduler's holds one.
func (m *MES) checkSlots(t *Tables, hw *hwState) error {
	var occupant [numSlots]*QueueRecord
	for i := range t.Queues {
		if q := &t.Queues[i]; q.Slot >= 0 {
			occupant[q.Slot] = q
		}
	}
	for s := range numSlots {
		_, st := m.cfg.Slots.Saved(s)
		switch q := occupant[s]; {
		case q != nil && st != cp.Running:
			return badState("queue %#x holds slot %d, where the CP has no running mapped queue (%v)", q.Doorbell, s, st)
		case q == nil && hw != nil && hw.owned&(1<<s) != 0 && st != cp.Empty:
			return badState("slot %d holds a mapped queue the scheduler's tables do not name", s)
		}
	}
	return nil
}
