package shaders

import (
	"bytes"
	"os"
	"testing"

	"vgpu/abi"
	"vgpu/shader"
)

// TestHeaderIsCurrent fails when a shader changed without `go generate ./shaders`.
func TestHeaderIsCurrent(t *testing.T) {
	want, err := Header()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../guest/include/vgpu_shaders.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("guest/include/vgpu_shaders.h is stale: run `go generate ./shaders`")
	}
}

// flat is a Memory over one slice at base.
type flat struct {
	base uint64
	b    []byte
}

func (m *flat) Load(a uint64, n int) (uint64, error) {
	var v uint64
	for i := range n {
		v |= uint64(m.b[a-m.base+uint64(i)]) << (8 * i)
	}
	return v, nil
}

func (m *flat) Store(a uint64, n int, v uint64) error {
	for i := range n {
		m.b[a-m.base+uint64(i)] = byte(v >> (8 * i))
	}
	return nil
}

func (m *flat) Atomic(op shader.AtomicOp, a uint64, n int, v, cmp uint64) (uint64, error) {
	old, _ := m.Load(a, n)
	return old, m.Store(a, n, op.Apply(old, v, cmp))
}

// Each shader computes what its doc says, work-item by work-item.
func TestShadersCompute(t *testing.T) {
	const base = 0x1000
	mem := &flat{base: base, b: make([]byte, 0x10000)}
	args := uint64(base)
	run := func(s Shader, d shader.Dims) {
		t.Helper()
		p, _, err := shader.Build(s.Insns)
		if err != nil {
			t.Fatal(err)
		}
		l := shader.NewLane(p, mem, nil, args, d, make([]byte, abi.SHADER_STACK_DEFAULT))
		if st, err := l.Run(1 << 20); st != shader.Exited || err != nil {
			t.Fatalf("%s: %v %v", s.Name, st, err)
		}
	}
	one := func(x, y uint64, ls, ng [3]uint64) shader.Dims {
		d := shader.Dims{LocalSize: ls, NumGroups: ng}
		d.Global = [3]uint64{x, y, 0}
		for k := range 2 {
			d.Group[k], d.Local[k] = d.Global[k]/ls[k], d.Global[k]%ls[k]
		}
		return d
	}
	// vector_add over 16 elements.
	const a, b, out = base + 0x100, base + 0x200, base + 0x300
	mem.Store(args, 8, a)
	mem.Store(args+8, 8, b)
	mem.Store(args+16, 8, out)
	for i := range uint64(16) {
		mem.Store(a+4*i, 4, i*3)
		mem.Store(b+4*i, 4, 0xFFFF_FFF0+i) // wraps: a 32-bit add
	}
	for i := range uint64(16) {
		run(VectorAdd(), one(i, 0, [3]uint64{4, 1, 1}, [3]uint64{4, 1, 1}))
	}
	for i := range uint64(16) {
		if got, _ := mem.Load(out+4*i, 4); got != uint64(uint32(i*3+0xFFFF_FFF0+i)) {
			t.Fatalf("vector_add out[%d] = %#x", i, got)
		}
	}
	// atomic_sum of those outputs.
	const sum = base + 0x800
	mem.Store(args, 8, out)
	mem.Store(args+8, 8, sum)
	var want uint64
	for i := range uint64(16) {
		run(AtomicSum(), one(i, 0, [3]uint64{16, 1, 1}, [3]uint64{1, 1, 1}))
		v, _ := mem.Load(out+4*i, 4)
		want += v
	}
	if got, _ := mem.Load(sum, 8); got != want {
		t.Fatalf("atomic_sum %d, want %d", got, want)
	}
	// spin_sum: 1000 additions per work-item.
	const spin = base + 0x2000
	mem.Store(args, 8, spin)
	mem.Store(args+8, 8, 1000)
	for i := range uint64(8) {
		run(SpinSum(), one(i, 0, [3]uint64{8, 1, 1}, [3]uint64{1, 1, 1}))
	}
	for i := range uint64(8) {
		if got, _ := mem.Load(spin+8*i, 8); got != 1000*(i+1) {
			t.Fatalf("spin_sum out[%d] = %d, want %d", i, got, 1000*(i+1))
		}
	}
	// ids_2d on a 8×4 grid of 4×2 workgroups.
	const ids = base + 0x1000
	mem.Store(args, 8, ids)
	for y := range uint64(4) {
		for x := range uint64(8) {
			run(IDs2D(), one(x, y, [3]uint64{4, 2, 1}, [3]uint64{2, 2, 1}))
		}
	}
	for y := range uint64(4) {
		for x := range uint64(8) {
			if got, _ := mem.Load(ids+4*(y*8+x), 4); got != x|y<<16|(x/4)<<24 {
				t.Fatalf("ids_2d (%d,%d) = %#x", x, y, got)
			}
		}
	}
	// copy_hold without holding: every workgroup of 4 copies in[0..4).
	const cin, cout = base + 0x2000, base + 0x2100
	mem.Store(args, 8, cin)
	mem.Store(args+8, 8, cout)
	mem.Store(args+16, 8, 0)
	for i := range uint64(4) {
		mem.Store(cin+4*i, 4, 100+i)
	}
	for i := range uint64(8) {
		d := one(i, 0, [3]uint64{4, 1, 1}, [3]uint64{2, 1, 1})
		d.Linear = i % 4
		run(CopyHold(), d)
	}
	for i := range uint64(8) {
		if got, _ := mem.Load(cout+4*i, 4); got != 100+i%4 {
			t.Fatalf("copy_hold out[%d] = %d, want %d", i, got, 100+i%4)
		}
	}
	// copy_hold with hold_ms 2: two sleeps of 1 ms, then exit.
	mem.Store(args+16, 8, 2)
	p, _, err := shader.Build(CopyHold().Insns)
	if err != nil {
		t.Fatal(err)
	}
	l := shader.NewLane(p, mem, nil, args, one(0, 0, [3]uint64{1, 1, 1}, [3]uint64{1, 1, 1}), make([]byte, abi.SHADER_STACK_DEFAULT))
	for k := range 3 {
		st, err := l.Run(1 << 20)
		if want := map[bool]shader.Stop{true: shader.Exited, false: shader.Sleeping}[k == 2]; st != want || err != nil {
			t.Fatalf("copy_hold turn %d: %v %v, want %v", k, st, err, want)
		}
		if k < 2 && l.SleepNS != 1000000 {
			t.Fatalf("copy_hold sleeps %d ns, want 1 ms", l.SleepNS)
		}
	}
}
