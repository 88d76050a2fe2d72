package receiverstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/writerlock"
)

// BenchmarkReceive measures one accepted message per durable commit.
func BenchmarkReceive(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	seq := int64(0)
	for b.Loop() {
		seq++
		out, err := s.Receive(ctx, Message{ID: fmt.Sprintf("e%d", seq), Flow: "f", Seq: seq, Body: body(1)})
		if err != nil || out != Accepted {
			b.Fatalf("Receive() = %q, %v", out, err)
		}
	}
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRawCommit is the storage ceiling beside BenchmarkReceive: one
// one-row INSERT per IMMEDIATE transaction on a file opened with the same
// DSN, so Receive's cost can be read as a ratio to it.
func BenchmarkRawCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.db")
	name, err := dsn(path)
	if err != nil {
		b.Fatal(err)
	}
	wl, err := writerlock.Open(path, writeTurnTimeout) // the same turn-taking as the store's writes
	if err != nil {
		b.Fatal(err)
	}
	defer wl.Close()
	db, err := sql.Open("sqlite", name)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		err := withTx(ctx, db, wl, nil, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, body(1))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkReceiveDuplicate measures the redelivery of an accepted message.
func BenchmarkReceiveDuplicate(b *testing.B) {
	s, _ := open(b)
	ctx := context.Background()
	m := msg("e1", "f", 1, 1)
	mustReceive(b, s, m, Accepted)
	for b.Loop() {
		if out, err := s.Receive(ctx, m); err != nil || out != Duplicate {
			b.Fatalf("Receive() = %q, %v", out, err)
		}
	}
}

// BenchmarkReceiveBatch measures batches of n accepted messages, one
// transaction (and one durable commit) per batch, spread over 8 flows.
func BenchmarkReceiveBatch(b *testing.B) {
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, _ := open(b)
			ctx := context.Background()
			next := map[string]int64{}
			id := 0
			ms := make([]Message, n)
			total := 0
			for b.Loop() {
				for i := range ms {
					flow := fmt.Sprintf("f%d", i%8)
					next[flow]++
					id++
					ms[i] = Message{ID: fmt.Sprintf("e%d", id), Flow: flow, Seq: next[flow], Body: body(1)}
				}
				res, err := s.ReceiveBatch(ctx, ms)
				if err != nil {
					b.Fatal(err)
				}
				for i, r := range res {
					if r.Err != nil || r.Outcome != Accepted {
						b.Fatalf("item %d = %q, %v", i, r.Outcome, r.Err)
					}
				}
				total += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
