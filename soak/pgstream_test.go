package soak

import (
	"encoding/binary"
	"testing"
)

// msg encodes a PostgreSQL frontend message: type, length, body.
func msg(typ byte, body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	out := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)+4))
	return append(out, b...)
}

// cs is a NUL-terminated string.
func cs(s string) []byte { return append([]byte(s), 0) }

// TestPgStream_FindsCommitInEitherProtocol feeds pgStream a client's
// stream: the startup message, an UPDATE in a batch, a COMMIT prepared
// (Parse, Describe, Sync), an UPDATE and the prepared COMMIT bound and
// executed in one batch, then the same name prepared again as another
// statement and executed, then a simple Query "commit". It must find the
// two COMMITs that run, where they begin, and nothing in the Parse or in
// the renamed statement, with the stream cut into two chunks anywhere
// before the batch COMMIT's Execute ends.
func TestPgStream_FindsCommitInEitherProtocol(t *testing.T) {
	startup := make([]byte, 8)
	binary.BigEndian.PutUint32(startup, 8)
	binary.BigEndian.PutUint32(startup[4:], 196608)
	update := append(msg('B', cs(""), cs("s_update"), []byte{0, 0, 0, 0, 0, 0}), msg('E', cs(""), []byte{0, 0, 0, 0})...)
	prepare := append(append(msg('P', cs("s_commit"), cs("COMMIT"), []byte{0, 0}), msg('D', []byte{'S'}, cs("s_commit"))...), msg('S')...)
	bind := msg('B', cs(""), cs("s_commit"), []byte{0, 0, 0, 0, 0, 0})
	exec := append(append(msg('D', []byte{'P'}, cs("")), msg('E', cs(""), []byte{0, 0, 0, 0})...), msg('S')...)
	rename := append(msg('P', cs("s_commit"), cs("UPDATE t SET x = 1"), []byte{0, 0}), append(bind, exec...)...)
	query := msg('Q', cs("commit"))
	var stream []byte
	stream = append(stream, startup...)
	stream = append(stream, update...)
	stream = append(stream, prepare...)
	stream = append(stream, update...)
	batchCommit := len(stream)
	stream = append(stream, bind...)
	stream = append(stream, exec...)
	stream = append(stream, rename...)
	simpleCommit := len(stream)
	stream = append(stream, query...)
	batchEnd := batchCommit + len(bind) + len(exec) - len(msg('S')) // where the Execute ends
	// One pass without cuts: both COMMITs, where they begin.
	var s pgStream
	at, ok := s.commitAt(stream[:batchEnd])
	if !ok || at != batchCommit {
		t.Fatalf("batch COMMIT: at %d, %v; want %d", at, ok, batchCommit)
	}
	rest := stream[batchEnd:]
	at, ok = s.commitAt(rest)
	if !ok || batchEnd+at != simpleCommit {
		t.Fatalf("simple COMMIT: at %d, %v; want %d", batchEnd+at, ok, simpleCommit)
	}
	// Cut anywhere: the batch COMMIT is found in the chunk where its
	// Execute ends, at its Bind or at 0, and never before that.
	for cut := 1; cut < batchEnd; cut++ {
		var s pgStream
		at1, ok1 := s.commitAt(stream[:cut])
		at2, ok2 := s.commitAt(stream[cut:batchEnd])
		switch {
		case ok1:
			t.Fatalf("cut at %d: COMMIT found at %d before its Execute was whole", cut, at1)
		case !ok2:
			t.Fatalf("cut at %d: batch COMMIT not found", cut)
		case cut <= batchCommit && cut+at2 != batchCommit:
			t.Fatalf("cut at %d: batch COMMIT at %d, want %d", cut, cut+at2, batchCommit)
		case cut > batchCommit && at2 != 0:
			t.Fatalf("cut at %d: batch COMMIT at %d of the second chunk, want 0 (its Bind began in the first)", cut, at2)
		}
		// The statement renamed from COMMIT is no COMMIT; the Query is.
		at3, ok3 := s.commitAt(stream[batchEnd:])
		if !ok3 || batchEnd+at3 != simpleCommit {
			t.Fatalf("cut at %d: after the batch, COMMIT at %d, %v; want the Query at %d", cut, batchEnd+at3, ok3, simpleCommit)
		}
	}
}

// A call of settle_claim (the queue's claim and ack) or of
// receive_accepted (the receiver's receive) commits on its own
// (autocommit): pgStream finds it where its Bind begins, also when the
// Bind carries a batch's arrays (larger than any COMMIT's), and not
// another statement bound the same way.
func TestPgStream_FindsTheSelfCommittingCalls(t *testing.T) {
	for _, call := range []string{
		`SELECT o_k FROM "q".settle_claim($1::text[], $2::bigint[], $3::bigint, $4::integer, $5::text)`,
		`SELECT "r".receive_accepted($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bigint[], $6::timestamptz[], $7::bigint, $8::bigint[])`,
	} {
		startup := make([]byte, 8)
		binary.BigEndian.PutUint32(startup, 8)
		binary.BigEndian.PutUint32(startup[4:], 196608)
		params := make([]byte, 4096) // the arrays of a batch
		prepare := append(msg('P', cs("s_call"), cs(call), []byte{0, 0}), msg('S')...)
		other := append(msg('P', cs("s_read"), cs(`SELECT id FROM "q".events WHERE id = ANY($1)`), []byte{0, 0}), msg('S')...)
		exec := append(msg('E', cs(""), []byte{0, 0, 0, 0}), msg('S')...)
		var stream []byte
		stream = append(stream, startup...)
		stream = append(stream, prepare...)
		stream = append(stream, other...)
		stream = append(stream, msg('B', cs(""), cs("s_read"), params)...)
		stream = append(stream, exec...)
		at := len(stream)
		stream = append(stream, msg('B', cs(""), cs("s_call"), params)...)
		stream = append(stream, exec...)
		var s pgStream
		got, ok := s.commitAt(stream)
		if !ok || got != at {
			t.Errorf("%s: at %d, %v; want %d", call, got, ok, at)
		}
	}
}
