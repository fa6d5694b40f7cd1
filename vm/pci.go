package vm

import (
	"encoding/json"
	"fmt"
)

// PCIDevice is one function from QMP query-pci, bridges flattened.
type PCIDevice struct {
	Bus, Slot, Function int
	Vendor, Device      uint16
	SubsystemVendor     uint16
	Subsystem           uint16
	Class               uint16 // base class << 8 | subclass
	ClassDesc           string // QEMU's name for the class, e.g. "Host bridge"
	QdevID              string // the -device id= ("gpu0"), "" for built-in devices
	IRQPin              int    // 0 none, 1..4 = INTA..INTD
	BARs                []PCIBAR
}

// PCIBAR is one BAR of a PCIDevice. A 64-bit BAR is one entry (index of its lower half).
type PCIBAR struct {
	Index    int
	Type     string // "mem" or "io"
	Mem64    bool
	Prefetch bool
	Address  uint64 // Unassigned until the firmware or guest places it
	Size     uint64
}

// Unassigned is the Address of a BAR that is not placed.
const Unassigned = ^uint64(0)

// BDF returns "bb:ss.f".
func (d PCIDevice) BDF() string { return fmt.Sprintf("%02x:%02x.%x", d.Bus, d.Slot, d.Function) }

func (d PCIDevice) String() string {
	return fmt.Sprintf("%s %04x:%04x class %04x %s", d.BDF(), d.Vendor, d.Device, d.Class, d.ClassDesc)
}

// BAR returns the BAR with the given index.
func (d PCIDevice) BAR(index int) (PCIBAR, bool) {
	for _, b := range d.BARs {
		if b.Index == index {
			return b, true
		}
	}
	return PCIBAR{}, false
}

// FindPCI returns the first device with the given vendor and device ID.
func FindPCI(devs []PCIDevice, vendor, device uint16) (PCIDevice, bool) {
	for _, d := range devs {
		if d.Vendor == vendor && d.Device == device {
			return d, true
		}
	}
	return PCIDevice{}, false
}

// The wire form of query-pci (QAPI PciInfo and friends).
type qmpPCIBus struct {
	Bus     int            `json:"bus"`
	Devices []qmpPCIDevice `json:"devices"`
}

type qmpPCIDevice struct {
	Bus       int `json:"bus"`
	Slot      int `json:"slot"`
	Function  int `json:"function"`
	ClassInfo struct {
		Desc  string `json:"desc"`
		Class int    `json:"class"`
	} `json:"class_info"`
	ID struct {
		Device          int `json:"device"`
		Vendor          int `json:"vendor"`
		Subsystem       int `json:"subsystem"`
		SubsystemVendor int `json:"subsystem-vendor"`
	} `json:"id"`
	IRQPin    int    `json:"irq_pin"`
	QdevID    string `json:"qdev_id"`
	PCIBridge *struct {
		Devices []qmpPCIDevice `json:"devices"`
	} `json:"pci_bridge"`
	Regions []struct {
		Bar      int    `json:"bar"`
		Type     string `json:"type"`
		Address  int64  `json:"address"` // QAPI int: an unplaced BAR is -1
		Size     int64  `json:"size"`
		Prefetch bool   `json:"prefetch"`
		Mem64    bool   `json:"mem_type_64"`
	} `json:"regions"`
}

// ParsePCI decodes the "return" value of query-pci.
func ParsePCI(raw json.RawMessage) ([]PCIDevice, error) {
	var buses []qmpPCIBus
	if err := json.Unmarshal(raw, &buses); err != nil {
		return nil, fmt.Errorf("vm: query-pci: %w", err)
	}
	var out []PCIDevice
	var walk func([]qmpPCIDevice)
	walk = func(devs []qmpPCIDevice) {
		for _, q := range devs {
			d := PCIDevice{
				Bus: q.Bus, Slot: q.Slot, Function: q.Function,
				Vendor: uint16(q.ID.Vendor), Device: uint16(q.ID.Device),
				SubsystemVendor: uint16(q.ID.SubsystemVendor), Subsystem: uint16(q.ID.Subsystem),
				Class: uint16(q.ClassInfo.Class), ClassDesc: q.ClassInfo.Desc,
				QdevID: q.QdevID, IRQPin: q.IRQPin,
			}
			for _, r := range q.Regions {
				typ := "mem"
				if r.Type == "io" {
					typ = "io"
				}
				d.BARs = append(d.BARs, PCIBAR{Index: r.Bar, Type: typ, Mem64: r.Mem64, Prefetch: r.Prefetch,
					Address: uint64(r.Address), Size: uint64(r.Size)})
			}
			out = append(out, d)
			if q.PCIBridge != nil {
				walk(q.PCIBridge.Devices)
			}
		}
	}
	for _, b := range buses {
		walk(b.Devices)
	}
	return out, nil
}
