package bench

import (
	"errors"
	"testing"

	"vgpu/bars"
)

// TestStartChildRefusesRecursion: a child device server whose program runs the scenarios
// instead of calling ServeIfChild gets an error, not a child of its own (a chain of them).
func TestStartChildRefusesRecursion(t *testing.T) {
	t.Setenv(childEnv, bars.DoorbellTrap.String())
	if _, _, err := startChild(bars.DoorbellTrap); !errors.Is(err, errChildRecursion) {
		t.Fatalf("startChild in a child: %v, want errChildRecursion", err)
	}
}
