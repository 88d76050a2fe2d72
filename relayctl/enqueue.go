package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/fairrelay/fairrelay/clock"
)

const (
	defaultChunk = 500
	maxChunk     = 10000
	maxLineBytes = 16 << 20 // one JSONL line; the store has its own, smaller, body limit
)

func cmdEnqueue(e *env, args []string) (err error) {
	f := newFlags(e, "enqueue",
		"enqueue --id ID --flow FLOW (--body BODY | --body-file PATH) [--to NAME] [--at TIME | --in D] [--now TICK]\n"+
			"       relayctl enqueue --file EVENTS.jsonl [--chunk N] [--now TICK]\n"+
			"       relayctl enqueue --file EVENTS.jsonl --check",
		"Enqueue adds one event, or every event of a JSONL file (\"-\" reads standard\n"+
			"input), at the end of its flow. A file is written in chunks, one transaction\n"+
			"per chunk; a chunk the store refuses is not written at all, and the chunks\n"+
			"before it stay. Enqueueing the same event again is a harmless duplicate, so a\n"+
			"file can be enqueued again after a fix. Each line is one JSON object:\n"+
			"  {\"id\": \"e1\", \"flow\": \"tenant-a\", \"body\": {\"delta\": 5}}\n"+
			"and may schedule its event with \"at\" or \"in\", as --at and --in do:\n"+
			"  {\"id\": \"e2\", \"flow\": \"tenant-a\", \"body\": 1, \"in\": \"90s\"}\n"+
			"A body that is a JSON string is enqueued as the string's text; any other JSON\n"+
			"value as its bytes exactly as written. --body-file reads one event's body\n"+
			"byte for byte from a file (\"-\": standard input), for a body too long or too\n"+
			"binary for the command line. Enqueue creates the queue when the\n"+
			"file does not exist yet. A progress bar is drawn on a terminal only.\n"+
			"Every refusal names the line of the file. --check reads the whole file and\n"+
			"writes nothing: it lists every line the queue would refuse (not an event\n"+
			"object, invalid, an ID used with another flow or body in the file or in the\n"+
			"queue) and exits 1 if there is one, else 0 with the counts.\n\n"+
			"--at TIME and --in D schedule the event (docs/contract.md §7.9): as its flow's\n"+
			"head it is not claimed before that tick, and it holds back only its own flow,\n"+
			"as a retry's wait does. On a queue run in real time TIME is an RFC 3339 time\n"+
			"(2026-12-04T20:00:00Z) or a tick of Unix milliseconds and D a Go duration\n"+
			"(90s, 2h), counted from the write's tick; on a logical-time queue both are tick\n"+
			"numbers (--at 120, --in 5). A time at or before the write's is at once. The\n"+
			"schedule is not part of the event's identity: enqueueing it again with another\n"+
			"one is a duplicate and changes nothing.\n\n"+
			"--to NAME (a line's \"to\") names the registered destination the event's flow\n"+
			"delivers to (docs/contract.md §7.11; 'relayctl destinations'). A flow's first\n"+
			"event chooses: without it the flow delivers to the relay's own --to URL. A later\n"+
			"event may leave it out; naming another destination than its flow's is refused\n"+
			"('relayctl flows set-destination' moves a flow).").
		withQueue().withNow()
	id := f.String("id", "", "event `ID` (unique forever)")
	flow := f.String("flow", "", "the event's `FLOW`")
	bodyText := f.String("body", "", "the event's `BODY`, e.g. '{\"delta\":5}'")
	bodyFile := f.String("body-file", "", "read the event's body from `PATH` (\"-\": standard input)")
	file := f.String("file", "", "enqueue every event of this JSONL `FILE` (\"-\": standard input)")
	chunk := f.Int("chunk", defaultChunk, fmt.Sprintf("events per transaction with --file (1..%d)", maxChunk))
	check := f.Bool("check", false, "with --file: check every line and write nothing")
	atText := f.String("at", "", "schedule the event: not claimed before `TIME` (RFC 3339 in real time, a tick in logical time)")
	inText := f.String("in", "", "schedule the event: not claimed before `D` after the write (a Go duration in real time, a tick count in logical time)")
	to := f.String("to", "", "the registered destination `NAME` the event's flow delivers to (default: the relay's own)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	bulk := f.isSet("file")
	if bulk {
		for _, name := range []string{"id", "flow", "body", "body-file", "at", "in", "to"} {
			if f.isSet(name) {
				if name == "at" || name == "in" {
					return usagef("--%s goes with a single event; in a file each line says its own \"at\" or \"in\"", name)
				}
				if name == "to" {
					return usagef("--to goes with a single event; in a file each line says its own \"to\"")
				}
				return usagef("--%s goes with a single event, not with --file", name)
			}
		}
		if *file == "" {
			return usagef("--file is empty")
		}
		if *chunk < 1 || *chunk > maxChunk {
			return usagef("--chunk %d: want 1..%d", *chunk, maxChunk)
		}
	} else {
		for _, name := range []string{"id", "flow"} {
			if !f.isSet(name) {
				return usagef("--%s is required (or --file for many events)", name)
			}
		}
		switch {
		case f.isSet("body") && f.isSet("body-file"):
			return usagef("--body and --body-file both give the body: use one")
		case !f.isSet("body") && !f.isSet("body-file"):
			return usagef("--body or --body-file is required (or --file for many events)")
		case f.isSet("body-file") && *bodyFile == "":
			return usagef("--body-file is empty")
		case f.isSet("at") && f.isSet("in"):
			return usagef("--at and --in both schedule the event: use one")
		case f.isSet("at") && !maybeTime(*atText):
			return usagef("--at %s: want a tick number such as 120, or an RFC 3339 time such as 2026-12-04T20:00:00Z on a queue run in real time; nothing changed", *atText)
		case f.isSet("in") && !maybeSpan(*inText):
			return usagef("--in %s: want a tick count such as 5, or a Go duration such as 30s on a queue run in real time; nothing changed", *inText)
		}
		for _, name := range []string{"chunk", "check"} {
			if f.isSet(name) {
				return usagef("--%s goes with --file", name)
			}
		}
	}
	var in io.Reader
	size := int64(-1)
	if bulk {
		// Open the input before the queue, so that a wrong file name does not
		// leave a new empty queue behind.
		if *file == "-" {
			in = e.stdin
		} else {
			fh, err := os.Open(e.abs(*file))
			if err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the path is said once, as given
				}
				return fmt.Errorf("events file %s: %w", *file, err)
			}
			defer fh.Close()
			if fi, err := fh.Stat(); err == nil && fi.Mode().IsRegular() {
				size = fi.Size()
			}
			in = fh
		}
	}
	if bulk && *check {
		if f.isSet("now") {
			return usagef("--now goes with a write; --check writes nothing")
		}
		return checkFile(e, *file, in)
	}
	body := []byte(*bodyText)
	if f.isSet("body-file") {
		// Read the body before the queue is opened: a wrong path or a body
		// the queue would refuse creates nothing.
		if body, err = readBody(e, *bodyFile); err != nil {
			return err
		}
	}
	q, err := e.openQueue(true)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, wall, err := currentTime(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	sched := schedule{wall: wall, now: now}
	if bulk {
		return enqueueFile(e, q, *file, in, size, *chunk, sched)
	}
	ev := newEvent{ID: *id, Flow: *flow, Body: body, To: *to}
	if f.isSet("at") {
		t, err := sched.at(*atText)
		if err != nil {
			return usagef("--at %s: %v; nothing changed", *atText, err)
		}
		ev.NotBefore = int64(t)
	}
	if f.isSet("in") {
		t, err := sched.in(*inText)
		if err != nil {
			return usagef("--in %s: %v; nothing changed", *inText, err)
		}
		ev.NotBefore = int64(t)
	}
	res, err := q.Enqueue(e.ctx, ev, now)
	if err != nil {
		if kindOf(err) == kindConflict {
			return conflictWith(e, q, ev, err)
		}
		if derr := enqueueDestination(e, q, ev, err); derr != nil {
			return derr
		}
		return explainEnqueue(e, q, now, err)
	}
	if res.Duplicate {
		fmt.Fprintf(e.stdout, "duplicate %s: already enqueued as flow %s, seq %d; nothing changed\n", ev.ID, ev.Flow, res.Seq)
		return nil
	}
	toNote := ""
	if ev.To != "" {
		toNote = ", to destination " + ev.To
	}
	if ev.NotBefore > int64(now) {
		fmt.Fprintf(e.stdout, "enqueued %s: flow %s%s, seq %d, at %s; not claimed before %s\n", ev.ID, ev.Flow, toNote, res.Seq, e.when(now), e.when(clock.Tick(ev.NotBefore)))
		return nil
	}
	fmt.Fprintf(e.stdout, "enqueued %s: flow %s%s, seq %d, at %s\n", ev.ID, ev.Flow, toNote, res.Seq, e.when(now))
	return nil
}

// readBody reads one event's body from the file name ("-": standard input),
// byte for byte. It reads at most one byte more than the queue takes, so a
// huge input is refused without being read whole; an empty one too.
func readBody(e *env, name string) ([]byte, error) {
	var in io.Reader = e.stdin
	shown := name
	if name == "-" {
		shown = "stdin"
	} else {
		fh, err := os.Open(e.abs(name))
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is said once, as given
			}
			return nil, fmt.Errorf("body file %s: %w; nothing changed", name, err)
		}
		defer fh.Close()
		in = fh
	}
	body, err := io.ReadAll(io.LimitReader(in, maxBodyBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("body file %s: %w; nothing changed", shown, err)
	case len(body) > maxBodyBytes:
		return nil, fmt.Errorf("body file %s: longer than %d bytes, the largest body the queue takes; nothing changed", shown, maxBodyBytes)
	case len(body) == 0:
		return nil, fmt.Errorf("body file %s is empty: a body has 1..%d bytes; nothing changed", shown, maxBodyBytes)
	}
	return body, nil
}

// explainEnqueue turns a refused enqueue into plain words.
func explainEnqueue(e *env, q *queueDB, now clock.Tick, err error) error {
	switch kindOf(err) {
	case kindConflict:
		return fmt.Errorf("an event ID is already used with another flow or body; nothing changed (an ID names one event forever): %w", err)
	case kindInvalid:
		return fmt.Errorf("refused, nothing changed: %w", err)
	case kindTimeRegression:
		return timeRegression(e, q, now)
	}
	return fmt.Errorf("enqueue: %w", err)
}

// conflictWith explains ErrConflict for ev with the event already stored.
func conflictWith(e *env, q *queueDB, ev newEvent, err error) error {
	old, rerr := q.Event(e.ctx, ev.ID)
	if rerr != nil {
		return explainEnqueue(e, q, 0, err)
	}
	what := "body"
	if old.Flow != ev.Flow {
		what = "flow"
	}
	return fmt.Errorf("event %s already exists with another %s (flow %s, seq %d); nothing changed (an event ID names one event forever)",
		ev.ID, what, old.Flow, old.Seq)
}

// enqueueFile streams JSONL events from in into the queue, chunk events per
// transaction.
func enqueueFile(e *env, q *queueDB, name string, in io.Reader, size int64, chunk int, sched schedule) error {
	now := sched.now
	if name == "-" {
		name = "stdin"
	}
	cr := &countingReader{r: in}
	bar := newProgress(e.stderr, e.isTerminal(e.stderr), size)
	defer bar.done()

	var (
		batch              []newEvent
		lines              []int // the line of each event in batch
		total, added, dups int
		chunks             int
		scheduled          int // new events with a not-before tick after now
	)
	earlier := func() string {
		if chunks == 0 {
			return "nothing from the file was enqueued"
		}
		return fmt.Sprintf("%s from %s before it are in the queue; enqueueing the file again is safe (duplicates change nothing)",
			plural(total, "event"), plural(chunks, "chunk"))
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := q.EnqueueBatch(e.ctx, batch, now)
		if err != nil {
			why := explainEnqueue(e, q, now, err)
			switch kindOf(err) {
			case kindInvalid:
				why = err // every line was checked (eventAt): not the event's own fault
			case kindConflict:
				if i, cerr := batchConflict(e, q, batch, err); cerr != nil {
					why = fmt.Errorf("line %d: %w", lines[i], cerr)
				}
			}
			if i, derr := batchDestination(e, q, batch, err); derr != nil {
				why = fmt.Errorf("line %d: %w", lines[i], derr)
			}
			return fmt.Errorf("%s lines %d-%d: chunk refused, none of it was written: %w; %s",
				name, lines[0], lines[len(lines)-1], why, earlier())
		}
		for i, r := range res {
			switch {
			case r.Duplicate:
				dups++
			default:
				added++
				if batch[i].NotBefore > int64(now) {
					scheduled++
				}
			}
		}
		total += len(batch)
		chunks++
		batch, lines = batch[:0], lines[:0]
		bar.update(cr.n, total)
		return nil
	}
	err := readEvents(e, name, cr, sched, func(l eventAt) error {
		if l.err != nil {
			return fmt.Errorf("%s:%d: %v; nothing from this chunk was written; %s", name, l.line, l.err, earlier())
		}
		batch, lines = append(batch, l.ev), append(lines, l.line)
		if len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		var re *readError
		if errors.As(err, &re) {
			return fmt.Errorf("%w; %s", err, earlier())
		}
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	bar.done()
	schedNote := ""
	if scheduled > 0 {
		schedNote = fmt.Sprintf(" (%d scheduled later)", scheduled)
	}
	fmt.Fprintf(e.stdout, "enqueued %s from %s in %s at %s: %d new%s, %s\n",
		plural(total, "event"), name, plural(chunks, "chunk"), e.when(now), added, schedNote, plural(dups, "duplicate"))
	return nil
}

// eventAt is one event of an events file, or why its line is not one.
type eventAt struct {
	line int // 1 is the file's first line
	ev   newEvent
	err  error // the line is not a valid event: ev is unset
}

// readError is a failure to read an events file (not a line's content).
type readError struct{ msg string }

func (r *readError) Error() string { return r.msg }

// readEvents calls each with every non-blank line of an events file, in
// order: the event, or why the line is not a valid one (not an event
// object, a schedule ("at", "in") not in sched's form, or refused by the
// queue's own checks, queue.Event.Validate, so that a refusal names its line
// and not its place in a chunk). It stops at the first error each returns,
// at a cancelled context, or at a read error (*readError).
func readEvents(e *env, name string, in io.Reader, sched schedule, each func(eventAt) error) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	line := 0
	for sc.Scan() {
		if err := e.ctx.Err(); err != nil {
			return &readError{fmt.Sprintf("%s: stopped before line %d (%v)", name, line+1, err)}
		}
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		ev, when, err := parseEventLine(text)
		if err == nil {
			ev.NotBefore, err = sched.notBefore(when.at, when.in, when.atSet, when.inSet)
		}
		if err == nil {
			err = ev.event().Validate()
		}
		if err := each(eventAt{line: line, ev: ev, err: err}); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
		}
		return &readError{fmt.Sprintf("%s: after line %d: %v", name, line, err)}
	}
	return nil
}

// maxListed is the number of refused lines `enqueue --check` lists; it
// counts the rest.
const maxListed = 50

// checkFile is `enqueue --file --check`: every line of the file is read and
// checked as the write would (readEvents), an ID is checked against the
// file's earlier lines and the queue (when it exists: it is opened
// read-only, and not created), and nothing is written. Each refused line is
// listed on stderr (the first maxListed); a file with one is an error (exit
// 1).
func checkFile(e *env, name string, in io.Reader) (err error) {
	if name == "-" {
		name = "stdin"
	}
	var q *queueDB
	if isPostgres(e.queuePath) || e.mustExist(e.queuePath, "queue", "queue") == nil {
		q, err = e.readQueue()
		switch {
		case errors.Is(err, errNoSchema):
			q = nil // a schema not created yet: every event would be new
		case err != nil:
			return err
		default:
			defer closeWith(q, &err)
		}
	}
	type first struct {
		line int
		sum  [sha256.Size]byte
	}
	seen := make(map[string]first)
	var added, dups, refused int
	refuse := func(line int, why error) {
		refused++
		if refused <= maxListed {
			fmt.Fprintf(e.stderr, "%s:%d: %v\n", name, line, why)
		}
	}
	sched := schedule{now: 0}
	if q != nil {
		st, err := q.Stats(e.ctx)
		if err != nil {
			return fmt.Errorf("read the clock mark: %w", err)
		}
		sched.now = clock.Tick(st.ClockMark)
	}
	// The destinations a line may name ("to"): those registered, when the
	// queue exists; a new queue has none.
	known := map[string]bool{}
	if q != nil {
		ds, err := q.Destinations(e.ctx)
		if err != nil && !errors.Is(err, errNoCapability) {
			return fmt.Errorf("read destinations: %w", err)
		}
		for _, d := range ds {
			known[d.Name] = true
		}
	}
	if sched.wall = e.clock.wallAt(sched.now); sched.wall {
		sched.now = max(sched.now, e.clock.wall.Now())
	}
	err = readEvents(e, name, in, sched, func(l eventAt) error {
		if l.err != nil {
			refuse(l.line, l.err)
			return nil
		}
		ev := l.ev
		if ev.To != "" && !known[ev.To] {
			refuse(l.line, fmt.Errorf("destination %q is not registered (add it with 'relayctl destinations add')", ev.To))
			return nil
		}
		sum := sha256.Sum256(append(append([]byte(ev.Flow), 0), ev.Body...))
		if f, ok := seen[ev.ID]; ok {
			if f.sum != sum {
				refuse(l.line, fmt.Errorf("event %s appears on line %d with another flow or body", ev.ID, f.line))
			} else {
				dups++
			}
			return nil
		}
		seen[ev.ID] = first{l.line, sum}
		if q != nil {
			old, rerr := q.Event(e.ctx, ev.ID)
			switch {
			case rerr == nil && (old.Flow != ev.Flow || !bytes.Equal(old.Body, ev.Body)):
				refuse(l.line, conflictWith(e, q, ev, rerr))
				return nil
			case rerr == nil:
				dups++
				return nil
			case kindOf(rerr) != kindNotFound:
				return fmt.Errorf("%s:%d: read event %s: %w", name, l.line, ev.ID, rerr)
			}
		}
		added++
		return nil
	})
	if err != nil {
		return err
	}
	if refused > maxListed {
		fmt.Fprintf(e.stderr, "%s: %d more refused lines not listed\n", name, refused-maxListed)
	}
	if refused > 0 {
		return fmt.Errorf("%s: %s refused, %s would be enqueued (%d new, %s); checked only, nothing written",
			name, plural(refused, "line"), plural(added+dups, "event"), added, plural(dups, "duplicate"))
	}
	fmt.Fprintf(e.stdout, "checked %s: %s, %d new, %s; nothing written\n", name, plural(added+dups, "event"), added, plural(dups, "duplicate"))
	return nil
}

// batchConflict finds the first event of a batch refused with ErrConflict
// whose ID is taken by another flow or body, in the queue or earlier in the
// batch, and explains it; it returns a nil error when it finds none.
func batchConflict(e *env, q *queueDB, batch []newEvent, err error) (int, error) {
	seen := make(map[string]newEvent, len(batch))
	for i, ev := range batch {
		if prev, ok := seen[ev.ID]; ok {
			if prev.Flow != ev.Flow || !bytes.Equal(prev.Body, ev.Body) {
				return i, fmt.Errorf("event %s appears earlier in the chunk with another flow or body", ev.ID)
			}
			continue
		}
		seen[ev.ID] = ev
		old, rerr := q.Event(e.ctx, ev.ID)
		if rerr == nil && (old.Flow != ev.Flow || !bytes.Equal(old.Body, ev.Body)) {
			return i, conflictWith(e, q, ev, err)
		}
	}
	return 0, nil
}

// eventLine is one line of an events file. "at" and "in" are optional and
// schedule the event as --at and --in do: a JSON string or number, read in
// the form of the queue's clock (schedule).
type eventLine struct {
	ID   *string         `json:"id"`
	Flow *string         `json:"flow"`
	Body json.RawMessage `json:"body"`
	At   json.RawMessage `json:"at,omitempty"`
	In   json.RawMessage `json:"in,omitempty"`
	// To names the registered destination of the event's flow
	// (docs/contract.md §7.11), as enqueue --to.
	To *string `json:"to,omitempty"`
}

// timing is a line's "at" and "in" as text, for schedule.notBefore.
type timing struct {
	at, in       string
	atSet, inSet bool
}

// parseEventLine reads one JSONL line: an object with id, flow and body,
// and optionally "at" or "in" (returned as text: their meaning depends on
// the queue's clock).
func parseEventLine(text []byte) (newEvent, timing, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var l eventLine
	if err := dec.Decode(&l); err != nil {
		return newEvent{}, timing{}, fmt.Errorf("not an event object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newEvent{}, timing{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case l.ID == nil:
		return newEvent{}, timing{}, errors.New(`missing "id"`)
	case l.Flow == nil:
		return newEvent{}, timing{}, errors.New(`missing "flow"`)
	case len(l.Body) == 0 || string(l.Body) == "null":
		return newEvent{}, timing{}, errors.New(`missing "body"`)
	}
	ev := newEvent{ID: *l.ID, Flow: *l.Flow, Body: []byte(l.Body)}
	if l.To != nil {
		ev.To = *l.To
	}
	if l.Body[0] == '"' {
		var s string
		if err := json.Unmarshal(l.Body, &s); err != nil {
			return newEvent{}, timing{}, fmt.Errorf("body: %v", err)
		}
		ev.Body = []byte(s)
	}
	var w timing
	var err error
	if w.at, w.atSet, err = scalarText("at", l.At); err != nil {
		return newEvent{}, timing{}, err
	}
	if w.in, w.inSet, err = scalarText("in", l.In); err != nil {
		return newEvent{}, timing{}, err
	}
	return ev, w, nil
}

// scalarText is a JSON string's text or a JSON integer's digits; set is
// false when the field is absent or null.
func scalarText(field string, raw json.RawMessage) (text string, set bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", false, fmt.Errorf("%q: %v", field, err)
		}
		return text, true, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", false, fmt.Errorf("%q: want a string or an integer, got %s", field, raw)
	}
	if _, err := n.Int64(); err != nil {
		return "", false, fmt.Errorf("%q: want a string or an integer, got %s", field, raw)
	}
	return n.String(), true, nil
}

// countingReader counts the bytes read through it (for the progress bar).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// plural says "1 event" or "2 events".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
