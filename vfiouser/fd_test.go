package vfiouser_test

import (
	"testing"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// TestNoFDLeaks runs a session that moves descriptors every way the protocol allows, good and
// bad, and checks the process ends with the descriptors it started with.
func TestNoFDLeaks(t *testing.T) {
	dev := newTestDevice(t)
	warm := vfiousertest.NewPair(t, dev) // first use of the poller opens its own fds
	warm.Close()
	<-dev.disconnectCh
	<-dev.connectedCh
	baseline := openFDs(t)

	t.Run("session", func(t *testing.T) {
		c := vfiousertest.NewPair(t, dev)
		mem, err := vfiousertest.NewGuestMemory(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		for i := range 8 { // vIOMMU style: many maps of one memfd, each with its own fd
			if err := c.DMAMap(uint64(i)<<16, mem, uint64(i)<<16, 1<<16, vfiousertest.MapOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.DMAUnmap(0, 2<<16); err != nil {
			t.Fatal(err)
		}
		for _, region := range []uint32{regSparse, regWhole} {
			ri, err := c.RegionInfo(region)
			if err != nil {
				t.Fatal(err)
			}
			ri.File.Close()
			m, err := c.MmapRegion(region)
			if err != nil {
				t.Fatal(err)
			}
			m.Close()
		}
		if _, err := c.EnableMSIX(msixVectors); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnableMSIX(4); err != nil { // replaces eventfds: the device closes the old
			t.Fatal(err)
		}
		fds := newFDs(t, 20)
		if _, err := call(c, vfiouser.CmdDMAMap, dmaMapPayload(32, 3, 0, 0, 0x1000), fds...); err == nil {
			t.Fatal("DMA_MAP with 20 fds succeeded")
		}
		if _, err := call(c, vfiouser.CmdRegionRead, regionAccess(0, regTrap, 4), fds[:3]...); err == nil {
			t.Fatal("REGION_READ with fds succeeded")
		}
		// A message whose fds arrive but whose body never does.
		c.SendRaw(vfiouser.Header{Cmd: vfiouser.CmdDMAMap, Size: 48}.Append(nil), fds[:1])
	})
	<-dev.disconnectCh
	waitFDs(t, baseline)
}
