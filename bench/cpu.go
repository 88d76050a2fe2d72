package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the machine's CPU time so far, summed over its CPUs, in the
// kernel's ticks (the first line of /proc/stat): what explains a case
// that does not scale with processes is often a machine already busy.
type CPUTimes struct {
	Total, Idle, IOWait uint64
	// Steal is the time the hypervisor ran other guests on this
	// machine's CPUs: neither this machine's work nor its idleness.
	Steal uint64
}

// ErrNoCPUTimes is returned by ReadCPUTimes where /proc/stat is missing
// (not Linux): the rows that need it are left out.
var ErrNoCPUTimes = errors.New("bench: no /proc/stat")

// ReadCPUTimes reads the machine's CPU times from /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, fmt.Errorf("%w: %v", ErrNoCPUTimes, err)
	}
	return parseCPUTimes(b)
}

// parseCPUTimes reads the "cpu" line of a /proc/stat: user nice system
// idle iowait irq softirq steal (guest time is counted in user already).
func parseCPUTimes(b []byte) (CPUTimes, error) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("%w: first line %q", ErrNoCPUTimes, line)
	}
	var t CPUTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("%w: field %d of %q: %v", ErrNoCPUTimes, i+1, line, err)
		}
		t.Total += v
		switch i {
		case 3:
			t.Idle = v
		case 4:
			t.IOWait = v
		case 7:
			t.Steal = v
		}
	}
	return t, nil
}

// Busy is the share of the machine's CPU time between t0 and t that was
// neither idle nor waiting for I/O (0..1), and the share waiting for I/O.
// Time stolen by the hypervisor for other guests is left out of both the
// busy time and the whole: the shares are of the time this machine had.
func (t CPUTimes) Busy(t0 CPUTimes) (busy, iowait float64) {
	total := float64(t.Total-t0.Total) - float64(t.Steal-t0.Steal)
	if total <= 0 {
		return 0, 0
	}
	idle, io := float64(t.Idle-t0.Idle), float64(t.IOWait-t0.IOWait)
	return (total - idle - io) / total, io / total
}
