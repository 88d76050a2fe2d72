package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// recordingQueue is a queue that keeps the batches it committed. It
// refuses, as the store does with ErrInvalid, a batch holding an event with
// an empty ID, flow or body, and then commits nothing of it.
type recordingQueue struct {
	queueLib  // nil: enqueueFile calls only EnqueueBatch
	committed []newEvent
	batches   []int
}

func (q *recordingQueue) EnqueueBatch(_ context.Context, es []queue.Event, _ clock.Tick) ([]queue.Enqueued, error) {
	for i, ev := range es {
		if ev.ID == "" || ev.Flow == "" || len(ev.Body) == 0 {
			return nil, fmt.Errorf("enqueue batch: event %d: %w: empty field", i, queuestore.ErrInvalid)
		}
	}
	out := make([]queue.Enqueued, len(es))
	for i, ev := range es {
		q.committed = append(q.committed, newEvent{ID: ev.ID, Flow: ev.Flow, Body: ev.Body})
		out[i] = queue.Enqueued{Seq: int64(len(q.committed))}
	}
	q.batches = append(q.batches, len(es))
	return out, nil
}

// FuzzEnqueueFile: the JSONL reader, whole (lines, blank lines, chunks,
// bad lines, refused chunks), against a reference written here. For any
// input and chunk size, what reaches the queue is exactly the events of the
// complete chunks before the first bad line or refused chunk, in order;
// that line is named in the error; a bad input never panics and never
// commits part of a chunk.
func FuzzEnqueueFile(f *testing.F) {
	for _, seed := range []struct {
		in    string
		chunk uint8
	}{
		{`{"id": "e1", "flow": "a", "body": {"delta": 5}}` + "\n" + `{"id": "e2", "flow": "a", "body": "x"}`, 1},
		{"\n\n" + `{"id": "e1", "flow": "a", "body": 1}` + "\r\n   \n" + `{"id": "e2", "flow": "b", "body": 2}` + "\n", 2},
		{`{"id": "e1", "flow": "a", "body": 1}` + "\n" + `{"id": "e2", "flow": "a"}` + "\n" + `{"id": "e3", "flow": "a", "body": 3}`, 1},
		{`{"id": "e1", "flow": "a", "body": 1}` + "\n" + `{"id": "", "flow": "a", "body": 2}` + "\n", 2},
		{`{"id": "e1", "flow": "a", "body": ""}`, 3},
		{"not json\n", 1},
		{`{"id": "e1", "flow": "a", "body": 1} {}`, 1},
		{"", 1},
	} {
		f.Add([]byte(seed.in), seed.chunk)
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		n := int(chunk%8) + 1
		q := &recordingQueue{}
		var out, errb bytes.Buffer
		e := newEnv(nil, &out, &errb)
		err := enqueueFile(e, &queueDB{s: q}, "f.jsonl", bytes.NewReader(in), int64(len(in)), n, schedule{now: 1})

		// The reference: lines as bufio.ScanLines cuts them, blank ones
		// skipped, each parsed alone; chunks of n; the first bad line or
		// refused chunk stops the load.
		var want []newEvent
		badLine := 0
		var pending []newEvent
		sc := bufio.NewScanner(bytes.NewReader(in))
		sc.Buffer(make([]byte, 64<<10), maxLineBytes)
		line := 0
		refused := func(b []newEvent) bool {
			for _, ev := range b {
				if ev.ID == "" || ev.Flow == "" || len(ev.Body) == 0 {
					return true
				}
			}
			return false
		}
		stopped := false
		for sc.Scan() && !stopped {
			line++
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 {
				continue
			}
			ev, _, perr := parseEventLine(text)
			if perr != nil {
				badLine, stopped = line, true
				break
			}
			pending = append(pending, ev)
			if len(pending) == n {
				if refused(pending) {
					stopped = true
					break
				}
				want = append(want, pending...)
				pending = nil
			}
		}
		if !stopped && len(pending) > 0 && !refused(pending) {
			want = append(want, pending...)
		} else if !stopped && len(pending) > 0 {
			stopped = true
		}

		if len(q.committed) != len(want) {
			t.Fatalf("committed %d events, want %d (chunk %d, err %v)", len(q.committed), len(want), n, err)
		}
		for i := range want {
			if want[i].ID != q.committed[i].ID || want[i].Flow != q.committed[i].Flow || !bytes.Equal(want[i].Body, q.committed[i].Body) {
				t.Fatalf("event %d = %+v, want %+v", i, q.committed[i], want[i])
			}
		}
		for i, b := range q.batches {
			if b != n && i != len(q.batches)-1 {
				t.Fatalf("batch %d has %d events, want the chunk size %d", i, b, n)
			}
		}
		if stopped != (err != nil) {
			t.Fatalf("stopped = %v but err = %v", stopped, err)
		}
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "f.jsonl") {
				t.Fatalf("error %q does not name the file", msg)
			}
			if badLine > 0 && !strings.HasPrefix(msg, fmt.Sprintf("f.jsonl:%d: ", badLine)) {
				t.Fatalf("error %q does not name line %d", msg, badLine)
			}
			if len(q.committed) == 0 && !strings.Contains(msg, "nothing from the file was enqueued") {
				t.Fatalf("error %q does not say that nothing was enqueued", msg)
			}
		}
		if errb.Len() != 0 { // a progress bar only on a terminal; none here
			t.Fatalf("stderr written without a terminal: %q", errb.String())
		}
	})
}
