package decode

import (
	"fmt"
	"strings"

	"vgpu/abi"
)

// IVEntryDwords is the size of one IH ring entry (abi.IH_ENTRY_BYTES / 4).
const IVEntryDwords = abi.IH_ENTRY_BYTES / 4

// IVEntry is one decoded IH ring entry (amdgpu_ih_decode_iv_helper's layout).
type IVEntry struct {
	Offset    int      // dword offset in its ring (IVs; IV: 0)
	Dwords    []uint32 // the entry (truncated: what there was)
	ClientID  uint32   // DW0 CLIENT_ID
	SourceID  uint32   // DW0 SOURCE_ID
	RingID    uint32   // DW0 RING_ID
	VMID      uint32   // DW0 VMID
	VMIDType  bool     // DW0 VMID_TYPE
	Timestamp uint64   // DW1, DW2 TIMESTAMP_HI: 48 bits
	TSSource  bool     // DW2 TIMESTAMP_SRC
	PASID     uint32   // DW3 PASID
	NodeID    uint32   // DW3 NODE_ID
	SrcData   [4]uint32
	Name      string  // the source by abi name without IH_SRC_ (CP_EOP, VM_FAULT, ...), or SRC_n
	Fields    []Field // the source's own fields: src_data decoded (CP ring, VM fault, shader trap...)
	Err       error
}

// Field returns the field named name.
func (e IVEntry) Field(name string) (Field, bool) {
	for _, f := range e.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// String is the entry on one line: the source's name, the common header fields, then the
// source's fields (or the raw src_data for a source without a decoder).
func (e IVEntry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s client_id=%s source_id=%d ring_id=%#x vmid=%d", e.Name, clientName(e.ClientID), e.SourceID, e.RingID, e.VMID)
	if e.VMIDType {
		b.WriteString(" vmid_type=1")
	}
	fmt.Fprintf(&b, " pasid=%d timestamp=%#x", e.PASID, e.Timestamp)
	if e.TSSource {
		b.WriteString(" timestamp_src=1")
	}
	if e.NodeID != 0 {
		fmt.Fprintf(&b, " node_id=%d", e.NodeID)
	}
	for _, f := range e.Fields {
		b.WriteByte(' ')
		b.WriteString(f.String())
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " error=%q raw=%s", e.Err.Error(), rawText(e.Dwords))
	}
	return b.String()
}

// IVEntries is a decoded IH ring: one line per entry, its dword offset first.
type IVEntries []IVEntry

func (es IVEntries) String() string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "0x%04x: %s\n", e.Offset, e.String())
	}
	return b.String()
}

// IVs decodes consecutive entries from dws[0] (a partial last one is ErrTruncated).
func IVs(dws []uint32) IVEntries {
	var out IVEntries
	for off := 0; off < len(dws); off += IVEntryDwords {
		e := IV(dws[off:min(off+IVEntryDwords, len(dws))])
		e.Offset = off
		out = append(out, e)
	}
	return out
}

var clients = names{abi.IH_CLIENT_GFX: "GFX", abi.IH_CLIENT_GRBM_CP: "GRBM_CP"}

func clientName(c uint32) string { return sel("", uint64(c), clients).Text }

// IV decodes one entry from dws (its first 8 dwords; fewer is ErrTruncated and decodes as if
// the rest were 0).
func IV(in []uint32) IVEntry {
	var d [IVEntryDwords]uint32
	n := copy(d[:], in)
	e := IVEntry{Dwords: in[:n]}
	if n < IVEntryDwords {
		e.Err = fmt.Errorf("%w: %d dwords of %d", ErrTruncated, n, IVEntryDwords)
	}
	e.ClientID = uint32(field(d[0], abi.IH_DW0_CLIENT_ID_MASK, abi.IH_DW0_CLIENT_ID__SHIFT))
	e.SourceID = uint32(field(d[0], abi.IH_DW0_SOURCE_ID_MASK, abi.IH_DW0_SOURCE_ID__SHIFT))
	e.RingID = uint32(field(d[0], abi.IH_DW0_RING_ID_MASK, abi.IH_DW0_RING_ID__SHIFT))
	e.VMID = uint32(field(d[0], abi.IH_DW0_VMID_MASK, abi.IH_DW0_VMID__SHIFT))
	e.VMIDType = d[0]&abi.IH_DW0_VMID_TYPE_MASK != 0
	e.Timestamp = uint64(d[1]) | field(d[2], abi.IH_DW2_TIMESTAMP_HI_MASK, abi.IH_DW2_TIMESTAMP_HI__SHIFT)<<32
	e.TSSource = d[2]&abi.IH_DW2_TIMESTAMP_SRC_MASK != 0
	e.PASID = uint32(field(d[3], abi.IH_DW3_PASID_MASK, abi.IH_DW3_PASID__SHIFT))
	e.NodeID = uint32(field(d[3], abi.IH_DW3_NODE_ID_MASK, abi.IH_DW3_NODE_ID__SHIFT))
	copy(e.SrcData[:], d[4:])
	src := ivSources[ivKey{e.ClientID, e.SourceID}]
	if src.name == "" {
		e.Name = fmt.Sprintf("SRC_%d", e.SourceID)
		e.Fields = []Field{list("src_data", e.SrcData[:])}
		return e
	}
	e.Name = src.name
	if e.ClientID == abi.IH_CLIENT_GRBM_CP {
		e.Fields = cpRing(e.RingID)
	}
	e.Fields = append(e.Fields, src.decode(e.SrcData)...)
	return e
}

type ivKey struct{ client, source uint32 }

type ivSource struct {
	name   string
	decode func(sd [4]uint32) []Field
}

// ivSources is every source the device raises, by client.
var ivSources = map[ivKey]ivSource{
	{abi.IH_CLIENT_GFX, abi.IH_SRC_VM_FAULT}:             {"VM_FAULT", decodeVMFault},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_CP_EOP}:           {"CP_EOP", decodeEOP},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_CP_BAD_OPCODE}:    {"CP_BAD_OPCODE", decodeCPError},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_CP_RESERVED_BITS}: {"CP_RESERVED_BITS", decodeCPError},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_CP_GPF}:           {"CP_GPF", decodeCPError},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_MES_ERROR}:        {"MES_ERROR", decodeMESError},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_MES_QUEUE_HUNG}:   {"MES_QUEUE_HUNG", decodeMESHung},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_SHADER_TRAP}:      {"SHADER_TRAP", decodeShaderTrap},
	{abi.IH_CLIENT_GRBM_CP, abi.IH_SRC_SHADER_ERROR}:     {"SHADER_ERROR", decodeShaderError},
}

// cpRing is a CP ring id's me, pipe and queue, and the HQD slot vgpu numbers them with
// (slot 0 the graphics queue, compute slots 1 + pipe*8 + queue).
func cpRing(id uint32) []Field {
	me := field(id, abi.IH_RING_ID_ME_MASK, abi.IH_RING_ID_ME__SHIFT)
	pipe := field(id, abi.IH_RING_ID_PIPE_MASK, abi.IH_RING_ID_PIPE__SHIFT)
	queue := field(id, abi.IH_RING_ID_QUEUE_MASK, abi.IH_RING_ID_QUEUE__SHIFT)
	f := []Field{dec("me", me), dec("pipe", pipe), dec("queue", queue)}
	if me == 1 {
		f = append(f, dec("slot", 1+pipe*abi.CP_QUEUES_PER_PIPE+queue))
	} else if me == 0 && id == 0 {
		f = append(f, dec("slot", 0))
	}
	return f
}

// decodeEOP: DW4 is RELEASE_MEM's INT_CTXID, or (PROTECTED_FENCE_SIGNAL, a MES queue) the
// doorbell offset, as gfx_v11_0_eop_irq reads it.
func decodeEOP(sd [4]uint32) []Field { return []Field{hex("src_data0", uint64(sd[0]))} }

var cpErrors = names{
	abi.CP_ERROR_NONE: "NONE", abi.CP_ERROR_BAD_OPCODE: "BAD_OPCODE", abi.CP_ERROR_RESERVED_BITS: "RESERVED_BITS",
	abi.CP_ERROR_BAD_PACKET: "BAD_PACKET", abi.CP_ERROR_TRANSLATION: "TRANSLATION", abi.CP_ERROR_MEMORY: "MEMORY",
	abi.CP_ERROR_BAD_REGISTER: "BAD_REGISTER", abi.CP_ERROR_IB_DEPTH: "IB_DEPTH", abi.CP_ERROR_IB_LIMIT: "IB_LIMIT",
	abi.CP_ERROR_RING_CONFIG: "RING_CONFIG", abi.CP_ERROR_SHADER: "SHADER", abi.CP_ERROR_CONTEXT_SAVE: "CONTEXT_SAVE",
}

// decodeCPError: a halt's DW4 CP_ERROR_*, DW5/6 the address, DW7 ERROR_INFO (the packet header,
// or an address's low bits), shown decoded as a header when it is one.
func decodeCPError(sd [4]uint32) []Field {
	f := []Field{sel("error", uint64(sd[0]), cpErrors), hex("addr", addr64(sd[1], sd[2])), hex("info", uint64(sd[3]))}
	if sd[3]>>abi.PM4_HEADER_TYPE__SHIFT == abi.PM4_TYPE3 {
		f = append(f, Field{"info_opcode", uint64(sd[3] & abi.PM4_HEADER_OPCODE_MASK >> abi.PM4_HEADER_OPCODE__SHIFT),
			OpcodeName(sd[3] & abi.PM4_HEADER_OPCODE_MASK >> abi.PM4_HEADER_OPCODE__SHIFT)})
	}
	return f
}

var mesErrors = func() names {
	n := names{}
	for v := uint64(0); v <= abi.MES_ERR_BUSY; v++ {
		n[v] = strings.TrimPrefix(abi.NameOf("MES_ERR_", v), "MES_ERR_")
	}
	return n
}()

func decodeMESError(sd [4]uint32) []Field {
	return []Field{sel("error", uint64(sd[0]), mesErrors), Field{"opcode", uint64(sd[1]), MESOpcodeName(sd[1])},
		hex("rptr", uint64(sd[2])), hex("doorbell_offset", uint64(sd[3]))}
}

func decodeMESHung(sd [4]uint32) []Field {
	return []Field{hex("doorbell_offset", uint64(sd[0])), dec("hung_slot", uint64(sd[1])), hex("rptr", addr64(sd[2], sd[3]))}
}

func decodeShaderTrap(sd [4]uint32) []Field {
	return []Field{hex("code", uint64(sd[0])), dec("pc", uint64(sd[1])), dec("work_item", uint64(sd[2]))}
}

var shaderErrors = names{
	abi.SHADER_ERR_NONE: "NONE", abi.SHADER_ERR_ILLEGAL_INSTRUCTION: "ILLEGAL_INSTRUCTION",
	abi.SHADER_ERR_JUMP_OUT_OF_RANGE: "JUMP_OUT_OF_RANGE", abi.SHADER_ERR_STACK_OVERFLOW: "STACK_OVERFLOW",
	abi.SHADER_ERR_MISALIGNED: "MISALIGNED", abi.SHADER_ERR_BAD_HELPER: "BAD_HELPER",
	abi.SHADER_ERR_MEMORY_FAULT: "MEMORY_FAULT", abi.SHADER_ERR_PROGRAM_SIZE: "PROGRAM_SIZE",
	abi.SHADER_ERR_PROGRAM_FETCH: "PROGRAM_FETCH",
}

func decodeShaderError(sd [4]uint32) []Field {
	return []Field{sel("error", uint64(sd[0]), shaderErrors), dec("pc", uint64(sd[1])), hex("addr", addr64(sd[2], sd[3]))}
}

var vmCIDs = names{
	abi.VM_CID_CB_DB: "CB_DB", abi.VM_CID_GE1: "GE1", abi.VM_CID_GE2: "GE2", abi.VM_CID_CPF: "CPF",
	abi.VM_CID_CPC: "CPC", abi.VM_CID_CPG: "CPG", abi.VM_CID_RLC: "RLC", abi.VM_CID_TCP: "TCP",
	abi.VM_CID_SQC_INST: "SQC_INST", abi.VM_CID_SQC_DATA: "SQC_DATA", abi.VM_CID_SQG: "SQG",
	abi.VM_CID_SDMA0: "SDMA0", abi.VM_CID_SDMA1: "SDMA1", abi.VM_CID_GCR: "GCR",
}

var walkerErrors = names{
	abi.VM_WALKER_NONE: "NONE", abi.VM_WALKER_READ_FAILED: "READ_FAILED", abi.VM_WALKER_RESERVED_BITS: "RESERVED_BITS",
	abi.VM_WALKER_BAD_HUGE_PAGE: "BAD_HUGE_PAGE", abi.VM_WALKER_NO_RETRY_MARKER: "NO_RETRY_MARKER",
}

var permFaults = []bitName{
	{abi.VM_PERM_VALID, "VALID"}, {abi.VM_PERM_READ, "READ"}, {abi.VM_PERM_WRITE, "WRITE"}, {abi.VM_PERM_EXECUTE, "EXECUTE"},
}

// decodeVMFault is the VM-fault IV as gmc_v11_0_process_interrupt reads it: the address from
// DW4 (page bits [43:12]) and DW5 [3:0] (bits [47:44]), the access kind and retry bit, the
// CAM index, and DW7's fault status in GCVM_L2_PROTECTION_FAULT_STATUS layout.
func decodeVMFault(sd [4]uint32) []Field {
	a := uint64(sd[0])<<12 | field(sd[1], abi.VM_IV_DW5_ADDR_HI_MASK, abi.VM_IV_DW5_ADDR_HI__SHIFT)<<44
	access := "NONE"
	switch {
	case sd[1]&abi.VM_IV_DW5_EXE_MASK != 0:
		access = "EXE"
	case sd[1]&abi.VM_IV_DW5_WRITE_MASK != 0:
		access = "WRITE"
	case sd[1]&abi.VM_IV_DW5_READ_MASK != 0:
		access = "READ"
	}
	retry := sd[1]&abi.VM_IV_DW5_RETRY_MASK != 0
	f := []Field{hex("addr", a), Field{"access", uint64(sd[1] >> abi.VM_IV_DW5_EXE__SHIFT & 7), access}, flag("retry", retry)}
	if retry {
		f = append(f, dec("cam_index", field(sd[2], abi.VM_IV_DW6_CAM_INDEX_MASK, abi.VM_IV_DW6_CAM_INDEX__SHIFT)))
	}
	st := sd[3]
	return append(f,
		hex("status", uint64(st)),
		flag("more_faults", st&abi.REG_VM_FAULT_STATUS__MORE_FAULTS_MASK != 0),
		sel("walker_error", field(st, abi.REG_VM_FAULT_STATUS__WALKER_ERROR_MASK, abi.REG_VM_FAULT_STATUS__WALKER_ERROR__SHIFT), walkerErrors),
		bits("permission_faults", field(st, abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK, abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT), permFaults),
		flag("mapping_error", st&abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK != 0),
		sel("cid", field(st, abi.REG_VM_FAULT_STATUS__CID_MASK, abi.REG_VM_FAULT_STATUS__CID__SHIFT), vmCIDs),
		flag("rw", st&abi.REG_VM_FAULT_STATUS__RW_MASK != 0),
		flag("atomic", st&abi.REG_VM_FAULT_STATUS__ATOMIC_MASK != 0),
		dec("status_vmid", field(st, abi.REG_VM_FAULT_STATUS__VMID_MASK, abi.REG_VM_FAULT_STATUS__VMID__SHIFT)),
		flag("prt", st&abi.REG_VM_FAULT_STATUS__PRT_MASK != 0),
	)
}
