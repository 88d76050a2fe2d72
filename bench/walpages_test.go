package bench

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWALFramePages reads the page numbers of a hand-built log and stops
// at the first frame whose salts are not the header's: the leftovers of an
// older log that a new one only partly overwrote.
func TestWALFramePages(t *testing.T) {
	const size = 512
	hdr := make([]byte, 32)
	binary.BigEndian.PutUint32(hdr[0:4], 0x377f0682)
	binary.BigEndian.PutUint32(hdr[8:12], size)
	copy(hdr[16:24], "saltsalt")
	frame := func(page uint32, salts string) []byte {
		f := make([]byte, 24+size)
		binary.BigEndian.PutUint32(f[0:4], page)
		copy(f[8:16], salts)
		return f
	}
	b := slices.Concat(hdr, frame(7, "saltsalt"), frame(2, "saltsalt"), frame(7, "saltsalt"), frame(9, "oldsalts"))
	path := filepath.Join(t.TempDir(), "x.db-wal")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := walFramePages(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{7, 2, 7}; !slices.Equal(got, want) {
		t.Errorf("pages = %v, want %v", got, want)
	}
	if err := os.WriteFile(path, hdr[:20], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := walFramePages(path); err == nil {
		t.Error("a 20-byte log read without an error")
	}
}

// TestBatchedCycleWALPages checks the probe on a relay whose flows each
// hold more (flow, seq) entries than one leaf page: the enqueue and the
// receive each write at least one such leaf per flow of the batch, besides
// their table's pages, and the claim and the settle, which change no
// (flow, seq) entry, write none.
func TestBatchedCycleWALPages(t *testing.T) {
	const size = 16
	cycles, err := CycleWALPages(context.Background(), BatchedRelayCycle(size), t.TempDir(), 400, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(cycles) != 2 {
		t.Fatalf("%d rounds, want 2", len(cycles))
	}
	for _, ps := range cycles {
		var ops []string
		for _, p := range ps {
			ops = append(ops, p.Op)
			t.Logf("%+v", p)
			switch p.Op {
			case "EnqueueBatch", "ReceiveBatch":
				if p.FlowSeqLeaves < size || p.Pages <= p.FlowSeqLeaves {
					t.Errorf("%s: %d pages, %d of them (flow, seq) leaves; want at least %d leaves and more pages", p.Op, p.Pages, p.FlowSeqLeaves, size)
				}
			default:
				if p.Pages == 0 || p.FlowSeqLeaves != 0 {
					t.Errorf("%s: %d pages, %d of them (flow, seq) leaves; want some pages and no leaves", p.Op, p.Pages, p.FlowSeqLeaves)
				}
			}
		}
		if want := []string{"EnqueueBatch", "ClaimBatch", "ReceiveBatch", "SettleBatch"}; !slices.Equal(ops, want) {
			t.Errorf("operations = %v, want %v", ops, want)
		}
		if pages, leaves := TotalPages(ps); pages != ps[0].Pages+ps[1].Pages+ps[2].Pages+ps[3].Pages || leaves != ps[0].FlowSeqLeaves+ps[2].FlowSeqLeaves {
			t.Errorf("TotalPages = %d, %d; want the sums of %+v", pages, leaves, ps)
		}
	}
}

// TestSingleCycleWALPages checks the probe of the single-event cycle: one
// new (flow, seq) entry in the enqueue and one in the receive, so exactly
// one leaf each unless the entry split its leaf.
func TestSingleCycleWALPages(t *testing.T) {
	cycles, err := CycleWALPages(context.Background(), RelayCycle(), t.TempDir(), 200, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range cycles {
		if len(ps) != 4 {
			t.Fatalf("%d operations, want 4", len(ps))
		}
		for _, p := range ps {
			t.Logf("%+v", p)
			want := 0
			if p.Op == "Enqueue" || p.Op == "Receive" {
				want = 1
			}
			if p.Pages == 0 || p.FlowSeqLeaves < want || p.FlowSeqLeaves > 2*want {
				t.Errorf("%s: %d pages, %d (flow, seq) leaves; want some pages and %d leaf (2 on a split)", p.Op, p.Pages, p.FlowSeqLeaves, want)
			}
		}
	}
}

// TestGoqiteAndCeilingWALPages checks that each of goqite's three commits
// and the ceiling's one write some pages and none is counted as a (flow,
// seq) leaf: neither has such an index.
func TestGoqiteAndCeilingWALPages(t *testing.T) {
	ctx := context.Background()
	goq, err := CycleWALPages(ctx, Goqite(), t.TempDir(), 20, 2)
	if err != nil {
		t.Fatal(err)
	}
	ceil, err := CycleWALPages(ctx, Ceiling(), t.TempDir(), 20, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][][]WALPages{goq, ceil} {
		if len(c) != 2 {
			t.Fatalf("%d rounds, want 2", len(c))
		}
		for _, p := range slices.Concat(c...) {
			t.Logf("%+v", p)
			if p.Pages == 0 || p.FlowSeqLeaves != 0 {
				t.Errorf("%s: %d pages, %d (flow, seq) leaves; want some pages and none", p.Op, p.Pages, p.FlowSeqLeaves)
			}
		}
	}
	if n := len(goq[0]); n != 3 {
		t.Errorf("goqite: %d operations, want 3", n)
	}
}

// TestCycleWALPagesRefusesAnUnnamedStep checks that a case whose Step does
// not name its operations is refused, not measured as one.
func TestCycleWALPagesRefusesAnUnnamedStep(t *testing.T) {
	if _, err := CycleWALPages(context.Background(), ClaimSettle(2, 2), t.TempDir(), 0, 1); err == nil {
		t.Error("claim+settle measured; want an error: its Step names no operations")
	}
}
