package bench

import (
	"errors"
	"math"
	"testing"
)

func TestParseCPUTimes(t *testing.T) {
	t0, err := parseCPUTimes([]byte("cpu  100 5 50 800 40 2 3 10 0 0\ncpu0 1 2 3 4 5 6 7 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	if t0 != (CPUTimes{Total: 1010, Idle: 800, IOWait: 40, Steal: 10}) {
		t.Fatalf("parseCPUTimes = %+v", t0)
	}
	t1, err := parseCPUTimes([]byte("cpu  400 5 150 900 140 2 3 210 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	busy, io := t1.Busy(t0)
	// Of 800 ticks, 200 stolen: of the 600 left, 400 busy, 100 idle, 100 waiting.
	if math.Abs(busy-400.0/600) > 1e-9 || math.Abs(io-100.0/600) > 1e-9 {
		t.Errorf("Busy = %v, %v, want 400/600, 100/600", busy, io)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, err := parseCPUTimes([]byte(bad)); !errors.Is(err, ErrNoCPUTimes) {
			t.Errorf("parseCPUTimes(%q) = %v, want ErrNoCPUTimes", bad, err)
		}
	}
}
