package drm

import "fmt"

// Doorbells is one DOORBELL BO of the file, mapped uncached into this process: 64-bit
// doorbells, one per user queue, handed out by index.
type Doorbells struct {
	*BO
	used []bool
}

// NewDoorbells creates and maps a doorbell page (INFO's doorbell_page_size bytes).
func (d *Device) NewDoorbells() (*Doorbells, error) {
	bo, err := d.CreateBO(uint64(d.Info.Doorbell_page_size), VGPU_GEM_DOMAIN_DOORBELL, 0)
	if err != nil {
		return nil, fmt.Errorf("doorbell page: %w", err)
	}
	if err := bo.Mmap(); err != nil {
		bo.Close()
		return nil, err
	}
	return &Doorbells{BO: bo, used: make([]bool, bo.Size/8)}, nil
}

// Get reserves a free doorbell index.
func (db *Doorbells) Get() (uint32, error) {
	for i, u := range db.used {
		if !u {
			db.used[i] = true
			return uint32(i), nil
		}
	}
	return 0, fmt.Errorf("all %d doorbells of the page are in use", len(db.used))
}

// Put frees index i.
func (db *Doorbells) Put(i uint32) { db.used[i] = false }

// Ring stores v in doorbell i: one 64-bit store to the uncached page, which the device sees
// as a doorbell write (a plain MOV; no locked instruction on device memory).
func (db *Doorbells) Ring(i uint32, v uint64) { *db.U64(uint64(i) * 8) = v }
