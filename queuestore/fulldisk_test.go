//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package queuestore

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

	"github.com/fairrelay/fairrelay/clock"
)

// fullDiskEnv makes the test binary a child that runs one operation on a
// queue under a file-size limit until the limit stops it; its value is the
// JSON fullDiskJob.
const fullDiskEnv = "FAIRRELAY_QUEUE_FULLDISK"

// fullDiskJob is what the child does: Op ("enqueue", "claim" or "settle")
// on the queue at Path at tick Now, one event at a time; settle goes
// through Claims in order.
type fullDiskJob struct {
	Op     string      `json:"op"`
	Path   string      `json:"path"`
	Now    clock.Tick  `json:"now"`
	Claims []claimedID `json:"claims,omitempty"`
}

type claimedID struct {
	ID  string `json:"id"`
	Gen int64  `json:"gen"`
}

// fullDiskResult is what the child reports on its last line.
type fullDiskResult struct {
	Acked  []string `json:"acked"`  // events whose operation returned no error
	Failed string   `json:"failed"` // the event of the operation that failed
	Err    string   `json:"err"`
	Full   bool     `json:"full"` // errors.Is(err, ErrDiskFull)
}

// fullDiskLimit is how far the child's files may grow: the -wal of a queue
// just opened is empty, so a few dozen one-event transactions fill it.
const fullDiskLimit = 64 << 10

// TestFullDiskChild is the child's body; it does nothing in a normal run.
func TestFullDiskChild(t *testing.T) {
	spec := os.Getenv(fullDiskEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestFullDisk")
	}
	var job fullDiskJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Println("job:", err)
		os.Exit(2)
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing the process
	s, err := Open(job.Path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: fullDiskLimit, Max: ^uint64(0)}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var res fullDiskResult
	for i := 0; res.Err == "" && i < 1000; i++ {
		var id string
		switch job.Op {
		case "enqueue":
			id = fmt.Sprintf("late-%04d", i)
			_, err = s.Enqueue(ctx, Event{ID: id, Flow: "late-" + id, Body: []byte(`{"delta":1}`)}, job.Now)
		case "claim":
			var c Claim
			var ok bool
			c, ok, err = s.Claim(ctx, job.Now)
			if err == nil && !ok {
				err = errors.New("nothing left to claim before the limit")
			}
			id = c.EventID
		case "settle":
			if i >= len(job.Claims) {
				err = errors.New("every claim settled before the limit")
				break
			}
			id = job.Claims[i].ID
			_, err = s.Settle(ctx, id, job.Claims[i].Gen, Result{OK: true}, job.Now)
		}
		if err != nil {
			res.Failed, res.Err, res.Full = id, err.Error(), errors.Is(err, ErrDiskFull)
			break
		}
		res.Acked = append(res.Acked, id)
	}
	_ = s.Close()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	os.Exit(0)
}

// runFullDisk runs job in a child and returns its result.
func runFullDisk(t *testing.T, job fullDiskJob) fullDiskResult {
	t.Helper()
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskChild$")
	cmd.Env = append(os.Environ(), fullDiskEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s child: %v\n%s", job.Op, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res fullDiskResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("%s child output %q: %v", job.Op, out, err)
	}
	t.Logf("%s child: %d acknowledged, then %s: %s", job.Op, len(res.Acked), res.Failed, res.Err)
	if !res.Full || !strings.Contains(res.Err, "no space left") {
		t.Fatalf("%s under the limit: error = %q, want ErrDiskFull saying no space left", job.Op, res.Err)
	}
	if len(res.Acked) == 0 {
		t.Errorf("%s: nothing was acknowledged before the limit: the child filled nothing", job.Op)
	}
	return res
}

// checkIntegrity runs PRAGMA integrity_check on s.
func checkIntegrity(t *testing.T, s *Store, after string) {
	t.Helper()
	var check string
	if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check after %s = %q, %v; want ok", after, check, err)
	}
}

// A queue that runs out of space mid-work (a child process under a
// file-size limit) gets ErrDiskFull from Enqueue, Claim and Settle alike.
// After each, the file passes integrity_check, every operation the child
// had acknowledged is in it, the one that failed left nothing, and the same
// operation succeeds again once there is space (the parent, without the
// limit).
func TestFullDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTest(t)
	for i := range 200 {
		enqueue(t, s, fmt.Sprintf("e%03d", i), fmt.Sprintf("f%03d", i), `{"delta":1}`, 1)
	}
	var claims []claimedID
	for range 60 {
		c := mustClaim(t, s, 2)
		claims = append(claims, claimedID{c.EventID, c.Generation})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Enqueue.
	res := runFullDisk(t, fullDiskJob{Op: "enqueue", Path: path, Now: 3})
	s = reopenTest(t, path)
	checkIntegrity(t, s, "enqueue")
	for _, id := range res.Acked {
		if e := event(t, s, id); e.State != "pending" {
			t.Errorf("acknowledged enqueue %s: state %q, want pending", id, e.State)
		}
	}
	if _, err := s.Event(ctx, res.Failed); !errors.Is(err, ErrNotFound) {
		t.Errorf("the enqueue that failed (%s) left an event: %v", res.Failed, err)
	}
	enqueue(t, s, res.Failed, "late-"+res.Failed, `{"delta":1}`, 3)
	before, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Claim.
	res = runFullDisk(t, fullDiskJob{Op: "claim", Path: path, Now: 4})
	s = reopenTest(t, path)
	checkIntegrity(t, s, "claim")
	for _, id := range res.Acked {
		if e := event(t, s, id); e.State != "inflight" {
			t.Errorf("acknowledged claim %s: state %q, want inflight", id, e.State)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Events.Inflight, before.Events.Inflight+int64(len(res.Acked)); got != want {
		t.Errorf("in flight after the claim child = %d, want %d (the failed claim must leave nothing)", got, want)
	}
	mustClaim(t, s, 4)
	s.Close()

	// Settle.
	res = runFullDisk(t, fullDiskJob{Op: "settle", Path: path, Now: 5, Claims: claims})
	s = reopenTest(t, path)
	checkIntegrity(t, s, "settle")
	for _, id := range res.Acked {
		if e := event(t, s, id); e.State != "acked" {
			t.Errorf("acknowledged settle %s: state %q, want acked", id, e.State)
		}
	}
	if e := event(t, s, res.Failed); e.State != "inflight" {
		t.Errorf("the settle that failed (%s): state %q, want still inflight", res.Failed, e.State)
	}
	failed := claims[len(res.Acked)]
	if o := settle(t, s, failed.ID, failed.Gen, Result{OK: true}, 5); o != Acked {
		t.Errorf("settle after the limit is lifted = %q, want %q", o, Acked)
	}
}

// reopenTest opens path again, closed at the end of the test.
func reopenTest(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// migrateFullDiskEnv makes the test binary a child that opens the queue
// at its value (a version-2 file) under a file-size limit of
// migrateFullDiskLimit, set before the Open, and prints the Open's error.
const migrateFullDiskEnv = "FAIRRELAY_QUEUE_MIGRATE_FULLDISK"

// migrateFullDiskLimit is less than the WAL that migrating
// testdata/v2-queue.db writes (it rebuilds three tables and their indexes).
const migrateFullDiskLimit = 40 << 10

// TestMigrateFullDiskChild is the child's body; it does nothing in a normal
// run.
func TestMigrateFullDiskChild(t *testing.T) {
	path := os.Getenv(migrateFullDiskEnv)
	if path == "" {
		t.Skip("runs only as the child of TestMigrate_V2FullDiskLeavesItUntouched")
	}
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: migrateFullDiskLimit, Max: ^uint64(0)}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	s, err := Open(path)
	if err == nil {
		s.Close()
		fmt.Println("open: no error")
		os.Exit(0)
	}
	fmt.Printf("full=%v %v\n", errors.Is(err, ErrDiskFull), err)
	os.Exit(0)
}

// A migration that runs out of space (a child process under a file-size
// limit) fails with ErrDiskFull and leaves the version-2 file as it was; a
// later Open with space migrates it.
func TestMigrate_V2FullDiskLeavesItUntouched(t *testing.T) {
	t.Parallel()
	path := copyV2(t)
	before := rawDump(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateFullDiskChild$")
	cmd.Env = append(os.Environ(), migrateFullDiskEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child: %s", out)
	if !strings.Contains(string(out), "full=true") || !strings.Contains(string(out), "no space left") {
		t.Fatalf("Open under the limit: %s; want ErrDiskFull saying no space left", out)
	}
	if after := rawDump(t, path); after != before {
		t.Fatalf("the failed migration changed the file:\n%s\nwant\n%s", after, before)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open with space: %v", err)
	}
	defer s.Close()
	checkIntegrity(t, s, "the migration")
	if st, err := s.Stats(context.Background()); err != nil || st.SchemaVersion != SchemaVersion {
		t.Fatalf("Stats() = %+v, %v; want version %d", st, err, SchemaVersion)
	}
}
