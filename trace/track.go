package trace

import "strconv"

// Track is one row of the timeline. The fixed tracks are declared when the recorder starts;
// a CU track is declared when its first event is written.
type Track uint16

const (
	TrackDevice    Track = iota // resets, faults without a queue, trace bookkeeping
	TrackTransport              // vfio-user requests handled by the transport worker
	TrackMES                    // the scheduler firmware: API frames, maps and unmaps
	TrackIH                     // the interrupt handler ring: IVs written, interrupts raised
	trackHQD0                   // HQD slot 0; HQD(s) is trackHQD0+s
)

// HQDSlots is the number of HQD slot tracks: cp.NumSlots (slot 0 the graphics queue, 1..16
// compute); a cp test checks the two agree.
const HQDSlots = 17

// MaxCUs is the number of compute units that get a track; events of a CU beyond it are
// dropped without being counted.
const MaxCUs = 256

const (
	trackCU0  = trackHQD0 + HQDSlots
	numTracks = int(trackCU0) + MaxCUs
	// fixedTracks are declared at start.
	fixedTracks = int(trackCU0)
	noTrack     = Track(numTracks)
)

// HQD is the track of an HQD slot; a slot out of range gives a track whose events are dropped.
func HQD(slot int) Track {
	if uint(slot) >= HQDSlots {
		return noTrack
	}
	return trackHQD0 + Track(slot)
}

// CU is the track of a compute unit.
func CU(i int) Track {
	if uint(i) >= MaxCUs {
		return noTrack
	}
	return trackCU0 + Track(i)
}

// Name is the track's name in the file: "device", "transport", "MES", "IH ring", "HQD n",
// "CU n". Readers (vgpu timeline) find tracks by these names.
func (t Track) Name() string {
	switch {
	case t == TrackDevice:
		return "device"
	case t == TrackTransport:
		return "transport"
	case t == TrackMES:
		return "MES"
	case t == TrackIH:
		return "IH ring"
	case t >= trackHQD0 && t < trackCU0:
		return "HQD " + strconv.Itoa(int(t-trackHQD0))
	case t >= trackCU0 && int(t) < numTracks:
		return "CU " + strconv.Itoa(int(t-trackCU0))
	}
	return "invalid"
}

// category is the track's event category (TrackEvent.categories): the engine that emits.
func (t Track) category() string {
	switch {
	case t == TrackDevice:
		return "device"
	case t == TrackTransport:
		return "vfiouser"
	case t == TrackMES:
		return "mes"
	case t == TrackIH:
		return "irq"
	case t >= trackHQD0 && t < trackCU0:
		return "cp"
	}
	return "compute"
}

// uuid is the track's TrackDescriptor.uuid; rootUUID is the process track all hang under.
func (t Track) uuid() uint64 { return firstTrackUUID + uint64(t) }

const (
	rootUUID       = 1
	firstTrackUUID = 0x100
)
