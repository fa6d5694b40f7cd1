package vfiouser_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// The benchmarks here put the client in another process, as QEMU is. With both ends in one
// process they share one Go scheduler, which can run client, reader and device goroutines on
// one thread with no OS wake-up — a shortcut no real client has, and one that favours some
// transport designs over others. The test binary re-executes itself as the client.

const (
	childSocketEnv = "VFIOUSER_BENCH_CLIENT_SOCKET"
	childModeEnv   = "VFIOUSER_BENCH_CLIENT_MODE"
	childIOVA      = 0x10_0000
	childMemSize   = 1 << 20
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(childSocketEnv); sock != "" {
		if err := benchClientChild(sock, os.Getenv(childModeEnv)); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchClientChild is the client process. It connects, negotiates and maps 1 MiB of guest
// memory without an fd (so the server's accesses are DMA messages), says "ready", then:
//   - mode "dma": serves the server's DMA requests until the server hangs up;
//   - mode "posted": reads a count n from stdin, sends n posted 4-byte REGION_WRITEs and one
//     REGION_READ that must see the last one, and answers "ok"; until stdin ends.
func benchClientChild(sock, mode string) error {
	c, err := vfiousertest.Dial(sock)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Negotiate(); err != nil {
		return err
	}
	mem, err := vfiousertest.NewGuestMemory(childMemSize)
	if err != nil {
		return err
	}
	defer mem.Close()
	if err := c.DMAMap(childIOVA, mem, 0, childMemSize, vfiousertest.MapOptions{NoFD: true}); err != nil {
		return err
	}
	fmt.Println("ready")
	if mode == "dma" {
		<-c.Done()
		return nil
	}
	in := bufio.NewScanner(os.Stdin)
	buf := make([]byte, 4)
	var v uint32
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			return err
		}
		for range n {
			v++
			binary.LittleEndian.PutUint32(buf, v)
			if err := c.PostWrite(regTrap, 8, buf); err != nil {
				return err
			}
		}
		if err := c.Read(regTrap, 8, buf); err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint32(buf); got != v {
			return fmt.Errorf("register reads %d after %d posted writes", got, v)
		}
		fmt.Println("ok")
	}
	return in.Err()
}

// childClient is a client process connected to a server in this process.
type childClient struct {
	dev   *testDevice
	peer  vfiouser.Peer
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChildClient(b *testing.B, mode string) *childClient {
	b.Helper()
	dev := newTestDevice(b)
	dev.quiet = true
	sock := filepath.Join(b.TempDir(), "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		b.Fatal(err)
	}
	srv := vfiouser.NewServer(dev, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(served) }()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childSocketEnv+"="+sock, childModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	cc := &childClient{dev: dev, stdin: stdin, out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		stdin.Close()
		cancel() // hangs up on the client, which then exits
		if err := cmd.Wait(); err != nil {
			b.Errorf("client process: %v", err)
		}
		<-served
	})
	if line := cc.line(b); line != "ready" {
		b.Fatalf("client process: %s", line)
	}
	select {
	case cc.peer = <-dev.connectedCh:
	case <-time.After(waitLong):
		b.Fatal("Connected not called")
	}
	return cc
}

func (cc *childClient) line(b *testing.B) string {
	b.Helper()
	if !cc.out.Scan() {
		b.Fatalf("client process ended: %v", cc.out.Err())
	}
	return strings.TrimSpace(cc.out.Text())
}

// BenchmarkPostedWriteOtherProcess is BenchmarkPostedWrite with the client in another process.
func BenchmarkPostedWriteOtherProcess(b *testing.B) {
	cc := startChildClient(b, "posted")
	b.ResetTimer()
	fmt.Fprintf(cc.stdin, "%d\n", b.N)
	if line := cc.line(b); line != "ok" {
		b.Fatalf("client process: %s", line)
	}
}

// BenchmarkPeerDMAOtherProcess is BenchmarkPeerDMA with the client in another process.
func BenchmarkPeerDMAOtherProcess(b *testing.B) {
	for _, size := range []int{64, 4096, 64 << 10} {
		for _, write := range []bool{false, true} {
			name := fmt.Sprintf("read/%d", size)
			if write {
				name = fmt.Sprintf("write/%d", size)
			}
			b.Run(name, func(b *testing.B) {
				cc := startChildClient(b, "dma")
				buf := make([]byte, size)
				for i := range buf {
					buf[i] = byte(i*7 + 3)
				}
				if err := cc.peer.DMAWrite(childIOVA, buf); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				var err error
				for range b.N {
					if write {
						err = cc.peer.DMAWrite(childIOVA, buf)
					} else {
						err = cc.peer.DMARead(childIOVA, buf)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				back := make([]byte, size)
				if err := cc.peer.DMARead(childIOVA, back); err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(back, buf) {
					b.Fatal("guest memory differs from what was DMA-written")
				}
			})
		}
	}
}
