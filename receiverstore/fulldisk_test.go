//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package receiverstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// fullDiskEnv makes the test binary a child that fills the receiver at the
// path it names under a file-size limit.
const fullDiskEnv = "FAIRRELAY_RECEIVER_FULLDISK"

// fullDiskResult is what the child reports on its last line.
type fullDiskResult struct {
	Acked      int    `json:"acked"`       // messages whose batch returned no error
	BatchErr   string `json:"batch_err"`   // the error that stopped the batches
	BatchFull  bool   `json:"batch_full"`  // it is ErrDiskFull
	SingleErr  string `json:"single_err"`  // a single Receive afterwards
	SingleFull bool   `json:"single_full"` // it is ErrDiskFull too
}

// TestFullDiskChild is the child's body; it does nothing in a normal run.
func TestFullDiskChild(t *testing.T) {
	path := os.Getenv(fullDiskEnv)
	if path == "" {
		t.Skip("runs only as the child of TestReceive_FullDisk")
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing the process
	s, err := Open(path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	lim := syscall.Rlimit{Cur: uint64(fi.Size()) + 96<<10, Max: ^uint64(0)}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var res fullDiskResult
	seq := int64(11) // the parent received 1..10
	for res.BatchErr == "" {
		ms := make([]Message, 100)
		for i := range ms {
			ms[i] = msg(fmt.Sprintf("full-%06d", seq+int64(i)), "f", seq+int64(i), 1)
		}
		if _, err := s.ReceiveBatch(ctx, ms); err != nil {
			res.BatchErr, res.BatchFull = err.Error(), errors.Is(err, ErrDiskFull)
			break
		}
		res.Acked += len(ms)
		seq += int64(len(ms))
		if seq > 1e6 {
			res.BatchErr = "the limit was never reached"
		}
	}
	_, err = s.Receive(ctx, msg("one-more", "f", seq, 1))
	if err != nil {
		res.SingleErr, res.SingleFull = err.Error(), errors.Is(err, ErrDiskFull)
	}
	_ = s.Close()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	os.Exit(0)
}

// A receiver that runs out of space mid-work (a child process under a
// file-size limit) gets ErrDiskFull for each write, loses nothing it had
// acknowledged, keeps a file that passes integrity_check, and takes work
// again once there is space (the parent, without the limit).
func TestReceive_FullDisk(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	for i := int64(1); i <= 10; i++ {
		mustReceive(t, s, msg(fmt.Sprintf("first-%d", i), "f", i, 1), Accepted)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskChild$")
	cmd.Env = append(os.Environ(), fullDiskEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res fullDiskResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	t.Logf("child: %+v", res)
	if !res.BatchFull || !strings.Contains(res.BatchErr, "no space left") {
		t.Errorf("batch error = %q, want ErrDiskFull saying no space left", res.BatchErr)
	}
	if !res.SingleFull {
		t.Errorf("single Receive error = %q, want ErrDiskFull", res.SingleErr)
	}
	if res.Acked == 0 {
		t.Errorf("the child acknowledged nothing before the limit: the test filled nothing")
	}

	s2 := reopen(t, path)
	var check string
	if err := s2.db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v; want ok", check, err)
	}
	want := int64(10 + res.Acked)
	if got := total(t, s2, "f"); got != want {
		t.Errorf("Total after the full disk = %d, want %d (10 before, %d acknowledged by the child)", got, want, res.Acked)
	}
	sn := snap(t, s2)
	if len(sn.Receipts) != int(want) {
		t.Errorf("receipts = %d, want %d", len(sn.Receipts), want)
	}
	mustReceive(t, s2, msg("after", "f", want+1, 1), Accepted)
	mustReceive(t, s2, msg(fmt.Sprintf("full-%06d", 11), "f", 11, 1), Duplicate)
}
