package dma

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestDirectRefusesMessageMemory: the L2's never-waiting path moves nothing when any byte is
// message-served, sends no message, and counts no fault; mmapped memory works as with Read.
func TestDirectRefusesMessageMemory(t *testing.T) {
	s := NewSpace(nil)
	s.SetBusMaster(true)
	client := &fakeClient{base: 0x10000, mem: make([]byte, 0x1000)}
	s.SetTransport(client)
	if err := s.Map(Mapping{IOVA: 0x10000, Size: 0x1000, Read: true, Write: true}); err != nil {
		t.Fatal(err)
	}
	f := newMemfd(t, 0x1000, 3)
	if err := s.Map(Mapping{IOVA: 0x20000, Size: 0x1000, Read: true, Write: true, File: f}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		iova    uint64
		write   bool
		wantErr error
	}{
		{"read message memory", 0x10000, false, ErrMessageServed},
		{"write message memory", 0x10ff0, true, ErrMessageServed},
		{"read mmapped", 0x20000, false, nil},
		{"write mmapped", 0x20100, true, nil},
		{"unmapped is a fault", 0x30000, false, ErrUnmapped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats().Faults
			p := make([]byte, 16)
			var err error
			if tc.write {
				err = s.WriteDirect(tc.iova, p)
			} else {
				err = s.ReadDirect(tc.iova, p)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			faults := s.Stats().Faults - before
			if tc.wantErr == ErrMessageServed && faults != 0 {
				t.Errorf("a refusal of message memory counted %d faults", faults)
			}
		})
	}
	if n := len(client.recorded()); n != 0 {
		t.Errorf("the direct path sent %d messages", n)
	}
}

// TestCutOffStopsMessagesInFlight: an access split into several messages sends none after a
// cut-off that happens while it is in flight (Bus Master cleared, every mapping dropped, the
// client changed).
func TestCutOffStopsMessagesInFlight(t *testing.T) {
	cutoffs := []struct {
		name string
		cut  func(s *Space)
	}{
		{"bus master off", func(s *Space) { s.SetBusMaster(false) }},
		{"unmap all", func(s *Space) { s.UnmapAll() }},
		{"client gone", func(s *Space) { s.SetTransport(nil) }},
	}
	for _, tc := range cutoffs {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSpace(nil)
			s.SetBusMaster(true)
			client := &fakeClient{base: 0x10000, mem: make([]byte, 0x3000)}
			s.SetTransport(client)
			// Message-served, mmapped, message-served: two messages around a copy.
			for i := uint64(0); i < 3; i++ {
				m := Mapping{IOVA: 0x10000 + i*0x1000, Size: 0x1000, Write: true}
				if i == 1 {
					m.File = newMemfd(t, 0x1000, 0)
				}
				if err := s.Map(m); err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			client.hook = func() {
				calls++
				if calls == 1 {
					tc.cut(s)
				}
			}
			err := s.Write(0x10000, make([]byte, 0x3000))
			if !errors.Is(err, ErrRevoked) {
				t.Fatalf("err %v, want ErrRevoked", err)
			}
			if n := len(client.recorded()); n != 1 {
				t.Errorf("%d messages sent, want only the one in flight at the cut-off", n)
			}
		})
	}
}

// TestCutOffAbandonsWaitingMessage: a message access waiting for a client that never answers
// returns as soon as the device is cut off, and its late answer touches nothing.
func TestCutOffAbandonsWaitingMessage(t *testing.T) {
	s := NewSpace(nil)
	s.SetBusMaster(true)
	release := make(chan struct{})
	entered := make(chan struct{})
	client := &fakeClient{base: 0x10000, mem: make([]byte, 0x1000)}
	client.hook = func() { close(entered); <-release }
	s.SetTransport(client)
	if err := s.Map(Mapping{IOVA: 0x10000, Size: 0x1000, Read: true}); err != nil {
		t.Fatal(err)
	}
	for i := range client.mem {
		client.mem[i] = 0xAB
	}
	p := make([]byte, 64)
	done := make(chan error, 1)
	go func() { done <- s.Read(0x10000, p) }()
	<-entered
	s.SetBusMaster(false) // the cut-off must not wait for the client either
	if err := <-done; !errors.Is(err, ErrRevoked) {
		t.Fatalf("err %v, want ErrRevoked", err)
	}
	close(release) // the client answers late
	for i := 0; i < 100 && len(client.recorded()) == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if !bytes.Equal(p, make([]byte, 64)) {
		t.Error("a late answer was copied into the caller's buffer")
	}
}
