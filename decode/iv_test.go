package decode_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp/cptest"
	"vgpu/decode"
	"vgpu/engine"
	"vgpu/gpuvm"
	"vgpu/irq"
	"vgpu/pm4"
)

// ihMem is the IH's memory: the ring at ihRing.
type ihMem struct {
	mu  sync.Mutex
	buf [0x4000]byte
}

const ihRing = 0x1000

func (m *ihMem) Write(va uint64, p []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.buf[va:], p)
	return nil
}

// ihEntries pushes ivs through a real IH and returns the ring's dwords it wrote.
func ihEntries(t *testing.T, ivs []engine.IV) []uint32 {
	t.Helper()
	m := &ihMem{}
	h := irq.NewIH(m, func(int) {}, nil)
	h.WriteReg(abi.REG_IH_RB_BASE_LO-abi.BLOCK_IH_BASE, ihRing)
	h.WriteReg(abi.REG_IH_RB_CNTL-abi.BLOCK_IH_BASE, abi.REG_IH_RB_CNTL__RB_ENABLE_MASK|10<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT)
	for _, iv := range ivs {
		h.Push(iv)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dws := make([]uint32, len(ivs)*decode.IVEntryDwords)
	for i := range dws {
		dws[i] = binary.LittleEndian.Uint32(m.buf[ihRing+4*i:])
	}
	return dws
}

// cpIVs runs a fence with an interrupt and then an unknown opcode on a real CP (slot 3) and
// returns the IVs it raised: the EOP, then the halt.
func cpIVs(t *testing.T) []engine.IV {
	r := cptest.NewRig(t, 1<<20)
	ring := r.StartQueue(3, cptest.QueueConfig{Base: 0x10000, QueueSize: 7})
	ring.Submit(pm4.Fence(0x20000, 1, 0x77, true), pm4.Packet(0x55, 0xAB))
	if !r.IVs.Wait(2, 10*time.Second) {
		t.Fatalf("IVs: %v", r.IVs.All())
	}
	return r.IVs.All()
}

func TestIVs(t *testing.T) {
	ivs := cpIVs(t)
	vm := gpuvm.New(gpuvm.Config{})
	vm.SetIVSink(func(iv engine.IV) { ivs = append(ivs, iv) })
	vm.ReportFault(engine.Access{VMID: 0, Client: abi.VM_CID_CPF}, 0xBCDE12345000, true, abi.VM_PERM_WRITE<<abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT)
	ivs = append(ivs,
		engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_SHADER_TRAP, RingID: 0x15, VMID: 2, PASID: 9, Data: [4]uint32{0x42, 7, 33}},
		engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_SHADER_ERROR, RingID: 0x4, VMID: 2, Data: [4]uint32{abi.SHADER_ERR_MISALIGNED, 3, 0x1001, 0x1}},
		engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_MES_QUEUE_HUNG, PASID: 5, Data: [4]uint32{0x30, 4, 0x100, 0}},
		engine.IV{Client: 0x33, Source: 0x44, Data: [4]uint32{1, 2, 3, 4}},
	)
	want := []string{
		"CP_EOP client_id=GRBM_CP(20) source_id=181 ring_id=0x24 vmid=0 pasid=0 timestamp=",
		"CP_BAD_OPCODE client_id=GRBM_CP(20) source_id=183 ring_id=0x24 vmid=0",
		"VM_FAULT client_id=GFX(10) source_id=0 ring_id=0x0 vmid=0 pasid=0",
		"SHADER_TRAP client_id=GRBM_CP(20) source_id=242 ring_id=0x15 vmid=2 pasid=9",
		"SHADER_ERROR client_id=GRBM_CP(20) source_id=243 ring_id=0x4 vmid=2",
		"MES_QUEUE_HUNG client_id=GRBM_CP(20) source_id=241",
		"SRC_68 client_id=51? source_id=68",
	}
	tail := []string{
		"me=1 pipe=0 queue=2 slot=3 src_data0=0x77",
		"me=1 pipe=0 queue=2 slot=3 error=BAD_OPCODE(1) addr=0x10020 info=0xc0005500 info_opcode=UNKNOWN_0x55",
		"addr=0xbcde12345000 access=WRITE retry=0 status=0x40840 more_faults=0 walker_error=NONE(0) permission_faults=WRITE mapping_error=0 cid=CPF(4) rw=1 atomic=0 status_vmid=0 prt=0",
		"me=1 pipe=1 queue=1 slot=10 code=0x42 pc=7 work_item=33",
		"me=1 pipe=0 queue=0 slot=1 error=MISALIGNED(4) pc=3 addr=0x100001001",
		"me=0 pipe=0 queue=0 slot=0 doorbell_offset=0x30 hung_slot=4 rptr=0x100",
		"src_data=[0x1 0x2 0x3 0x4]",
	}
	es := decode.IVs(ihEntries(t, ivs))
	if len(es) != len(want) {
		t.Fatalf("%d entries:\n%s", len(es), es)
	}
	for i, e := range es {
		s := e.String()
		if !strings.HasPrefix(s, want[i]) || !strings.HasSuffix(s, tail[i]) || e.Err != nil {
			t.Errorf("entry %d:\n got %s\nwant %s ... %s", i, s, want[i], tail[i])
		}
		if e.Timestamp == 0 || e.Offset != i*decode.IVEntryDwords {
			t.Errorf("entry %d: timestamp %#x offset %d", i, e.Timestamp, e.Offset)
		}
	}
	if f, ok := es[2].Field("addr"); !ok || f.Value != 0xBCDE12345000 {
		t.Errorf("VM fault address %v", f)
	}
}

func TestIVErrors(t *testing.T) {
	e := decode.IV([]uint32{0x14 | abi.IH_SRC_CP_EOP<<8, 1, 2})
	if !errors.Is(e.Err, decode.ErrTruncated) || e.Name != "CP_EOP" || !strings.Contains(e.String(), "raw=[0xb514 0x1 0x2]") {
		t.Errorf("%v: %s", e.Err, e)
	}
	if e := decode.IV(nil); !errors.Is(e.Err, decode.ErrTruncated) {
		t.Errorf("empty: %v", e.Err)
	}
	// A retry fault names its CAM entry.
	e = decode.IV([]uint32{abi.IH_CLIENT_GFX, 0, 0, 0, 0x100, abi.VM_IV_DW5_RETRY_MASK | abi.VM_IV_DW5_READ_MASK | 1, 17, 0})
	if s := e.String(); !strings.Contains(s, "addr=0x100000100000 access=READ retry=1 cam_index=17") {
		t.Errorf("%s", s)
	}
}
