package device

import (
	"fmt"
	"sort"
	"strings"

	"vgpu/abi"
)

// PacketDecoder turns a packet's dwords into text; nil, or an empty result, shows the opcode
// and the raw dwords.
type PacketDecoder func(dwords []uint32) string

// Text renders the status for people, as `vgpu status` prints it. decode renders the packet
// each stopped queue sits on (nil: opcode name and raw dwords).
func (s *Status) Text(decode PacketDecoder) string {
	var r report
	f := s.Function
	fmt.Fprintf(&r.b, "vgpu status at %s\n", s.Time.UTC().Format("2006-01-02 15:04:05.000 UTC"))
	r.section("function")
	r.line("resets", "%d DEVICE_RESET, %d FLR, %d engine resets, %d client disconnects", f.DeviceResets, f.FLRs, f.EngineResets, f.Disconnects)
	r.line("goroutines", "%d (%d cut-offs with a straggler)", f.Goroutines, f.Stragglers)
	c := s.CP
	r.line("cp", "%d packets, %d IBs, %d halts, %d doorbells (%d matched no queue), %d shader dispatches",
		c.Packets, c.IBs, c.Halts, c.Doorbells, c.DoorbellMisses, c.ShaderDispatches)

	r.section("queues (HQD slots in use)")
	if len(s.HQDs) == 0 {
		r.sub("none")
	}
	for _, h := range s.HQDs {
		writeHQD(&r, &h, decode)
	}

	writeMESStatus(&r, s)
	writeFaults(&r, &s.Faults)

	l := s.L2
	r.section("l2 and TLBs")
	r.line("l2", "%d of %d lines (%d dirty), %d hits / %d misses, %d evictions, %d write-backs (%d failed)",
		l.Lines, l.Capacity, l.DirtyLines, l.Hits, l.Misses, l.Evictions, l.WriteBacks, l.WriteBackErrors)
	g := s.TLB.GART
	r.line("GART TLB (VMID 0)", "%d hits, %d misses, %d flushes, %d entries", g.TLBHits, g.TLBMisses, g.TLBFlushes, g.TLBEntries)
	v := s.TLB.VM
	r.line("VM TLB (VMIDs 1-15)", "%d hits, %d walks, %d invalidations, %d entries", v.TLBHits, v.TLBMisses, v.Invalidations, v.TLBEntries)

	in := s.Interrupts
	r.section("interrupts")
	var vecs []string
	for _, x := range in.Vectors {
		if x.Delivered == 0 && !x.Pending {
			continue
		}
		t := fmt.Sprintf("%d: %d sent", x.Vector, x.Delivered)
		if x.Pending {
			t += ", 1 held pending"
			if x.Masked {
				t += " (masked)"
			} else if !x.Eventfd {
				t += " (no eventfd)"
			}
		}
		vecs = append(vecs, t)
	}
	if len(vecs) == 0 {
		vecs = []string{"none"}
	}
	r.line("MSI-X by vector", "%s", strings.Join(vecs, "; "))
	r.line("not sent", "%d with Bus Master off, %d to a vector the function lacks, %d lost", in.NoBusMaster, in.Refused, in.Controller.Dropped)
	ih := in.IH
	r.line("IH ring", "%d entries written, %d pending, %d dropped, %d overflows", ih.Entries, ih.Pending, ih.Dropped, ih.Overflows)

	u := s.Unmodelled
	r.section("unmodelled register accesses (most frequent first)")
	r.line("offsets", "%d distinct, %d misshapen accesses", u.Offsets, u.Misshapen)
	for i, a := range u.Top {
		if i == 16 {
			r.sub("... %d more offsets", u.Offsets-i)
			break
		}
		name := a.Name
		if name == "" {
			name = "(no register)"
		}
		r.sub("%#07x %-28s %d accesses", a.Offset, name, a.Count)
	}

	sp := s.Spins
	r.section("register spins")
	r.line("warnings", "%d (a register read %d times without a write or a change)", sp.Warnings, sp.Threshold)
	for _, x := range sp.Active {
		r.sub("spun on: %s (%#x) = %#x, %d reads with no write or change since", x.Name, x.Offset, x.Value, x.Reads)
	}
	for _, x := range sp.Recent {
		r.sub("warned: %s (%#x) = %#x", x.Name, x.Offset, x.Value)
	}

	inj := s.Injection
	r.section("fault injection")
	if len(inj.Rules) == 0 {
		r.sub("no rules")
	}
	for _, x := range inj.Rules {
		spent := ""
		if x.Spent {
			spent = ", spent"
		}
		r.sub("rule %d: %s: %d seen, %d fired%s", x.ID, x.Rule, x.Seen, x.Fired, spent)
	}
	if len(inj.Totals) > 0 {
		kinds := make([]string, 0, len(inj.Totals))
		for k := range inj.Totals {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for i, k := range kinds {
			kinds[i] = fmt.Sprintf("%s %d", k, inj.Totals[k])
		}
		r.line("injections made", "%s", strings.Join(kinds, ", "))
	}
	return r.b.String()
}

func writeHQD(r *report, h *HQDStatus, decode PacketDecoder) {
	who := "kernel queue"
	if h.MESQueue {
		who = fmt.Sprintf("MES queue, PASID %#x", h.PASID)
	}
	r.sub("slot %2d (%s, %s): %s%s", h.Slot, h.Name, who, h.StateName, map[bool]string{true: ", idle", false: ""}[h.Idle])
	r.sub("        VMID %d, ring %#x (%s), rptr %d wptr %d (%d dwords behind), doorbell %#x%s, %d fences",
		h.VMID, h.RingBase, bytesIEC(h.RingBytes), h.Rptr, h.Wptr, int64(h.Wptr-h.Rptr), h.Doorbell,
		map[bool]string{true: "", false: " (off)"}[h.DoorbellOn], h.Fences)
	if h.Error != 0 {
		r.sub("        halted: %s at %#x, info %#x", h.ErrorName, h.ErrorAddr, h.ErrorInfo)
	}
	if len(h.Packet) == 0 {
		return
	}
	where := "ring"
	if h.IBLevel > 0 {
		where = fmt.Sprintf("IB level %d", h.IBLevel)
	}
	r.sub("        stopped on %s (%d dwords) at %#x in the %s", h.Opcode, h.PacketDwords, h.PacketAddr, where)
	text := ""
	if decode != nil {
		text = decode(h.Packet)
	}
	if text == "" {
		var dw []string
		for _, d := range h.Packet {
			dw = append(dw, fmt.Sprintf("%08x", d))
		}
		text = strings.Join(dw, " ")
		if h.PacketDwords > len(h.Packet) {
			text += " ..."
		}
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		r.sub("          %s", line)
	}
}

func writeMESStatus(r *report, s *Status) {
	m := &s.MES
	r.section("mes (scheduler)")
	r.line("state", "%s, API ring rptr %d wptr %d, owns slots %#x", abi.NameOf("MES_STATE_", uint64(m.State)), m.Ring.Rptr, m.Ring.Wptr, m.Owned)
	r.line("frames", "%d completed, %d failed; %d maps, %d unmaps, %d processes", m.Frames, m.FrameErrors, m.Maps, m.Unmaps, m.Processes)
	hung := 0
	for i, q := range m.QueueList {
		if q.Hung {
			hung++
		}
		if i == 32 {
			r.sub("... %d more queues", len(m.QueueList)-i)
			break
		}
		where := "unmapped"
		if q.Mapped {
			where = fmt.Sprintf("slot %d", q.Slot)
		}
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{q.Hung, "HUNG"}, {q.Suspended, "suspended"}, {q.HasWork, "has work"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		fl := ""
		if len(flags) > 0 {
			fl = ", " + strings.Join(flags, ", ")
		}
		r.sub("doorbell %#x: %s%s; PASID %#x, process %#x, gang %#x, %s (in-process %d), VMID %d, %d maps, %d preemptions",
			q.Doorbell, where, fl, q.PASID, q.Process, q.Gang, abi.NameOf("MES_PRIORITY_", uint64(q.Priority)), q.Inproc,
			q.VMID, q.Maps, q.Preempts)
	}
	r.line("queues", "%d added, %d hung", len(m.QueueList), hung)
	if len(m.LastFrames) > 0 {
		r.line("last frames", "(oldest first)")
	}
	for _, f := range m.LastFrames {
		op := abi.NameOf("MES_SCH_API_", uint64(f.Opcode))
		if f.Opcode == abi.MES_SCH_API_MISC {
			op += "/" + abi.NameOf("MES_MISC_", uint64(f.Sub))
		}
		res := "ok"
		if f.Error != 0 {
			res = f.Why
		}
		r.sub("#%-5d %-36s %s (at %s)", f.Seq, op, res, f.At.UTC().Format("15:04:05.000"))
	}
}

func writeFaults(r *report, f *FaultStatus) {
	r.section("faults")
	r.line("counts", "%d VMID 0 translation faults, %d memory access errors, %d VM faults, %d retry-fault IVs",
		f.Translation, f.AccessErrors, f.VMFaults, f.RetryFaultIVs)
	if f.GMCStatus&abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK != 0 {
		r.line("VMID 0 latch", "%s at %#x (status %#x)",
			abi.NameOf("VM_FAULT_", uint64(f.GMCStatus&abi.REG_GMC_VM_FAULT_STATUS__REASON_MASK>>abi.REG_GMC_VM_FAULT_STATUS__REASON__SHIFT)),
			f.GMCAddr, f.GMCStatus)
	}
	for _, x := range f.Recent {
		r.sub("VMID %d page %#x: %s at %s", x.VMID, x.Addr, x.What, x.At.UTC().Format("15:04:05.000"))
	}
}
