package browser

import (
	"testing"
	"time"

	"vgpu/trace"
)

// What the workload's trace must show.
var (
	wantHQDTracks  = trace.HQDSlots
	wantBusy       = map[string]int{"hqd": 2, "mes": 1, "cu": 1}
	highlightQuery = "INDIRECT_BUFFER"
)

// recordWorkload records two queues' work through the recorder, as the engines' hooks do:
// the MES maps the queues, each doorbell's flow runs to its queue's fence and the IV that
// reports it, a dispatch runs on two CUs.
func recordWorkload(t *testing.T, path string) {
	r, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spin := func(d time.Duration) { time.Sleep(d) }
	for _, slot := range []int{1, 2} {
		r.Begin(trace.TrackMES, "MAP_QUEUE", trace.U("slot", uint64(slot)))
		spin(200 * time.Microsecond)
		r.End(trace.TrackMES)
	}
	for round := range 3 {
		for _, slot := range []int{1, 2} {
			f := r.NewFlow()
			r.Begin(trace.TrackTransport, "REGION_WRITE")
			r.FlowStep(trace.TrackTransport, "doorbell", f, trace.U("wptr", uint64(16*(round+1))))
			r.End(trace.TrackTransport)
			r.Begin(trace.HQD(slot), "INDIRECT_BUFFER", trace.U("ib", 0x100000))
			r.Begin(trace.HQD(slot), "DISPATCH_DIRECT")
			for cu := range 2 {
				r.Begin(trace.CU(cu+slot-1), "workgroup")
			}
			spin(300 * time.Microsecond)
			for cu := range 2 {
				r.End(trace.CU(cu + slot - 1))
			}
			r.End(trace.HQD(slot))
			r.Begin(trace.HQD(slot), "RELEASE_MEM")
			r.FlowStep(trace.HQD(slot), "fence", f)
			r.End(trace.HQD(slot))
			r.End(trace.HQD(slot))
			spin(50 * time.Microsecond)
			r.FlowEnd(trace.TrackIH, "IV", f, trace.U("src", 181))
		}
	}
	r.Begin(trace.TrackMES, "UNMAP_QUEUE", trace.U("slot", 2))
	spin(150 * time.Microsecond)
	r.End(trace.TrackMES)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
