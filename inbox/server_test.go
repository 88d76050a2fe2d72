package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

var secret = []byte("test-secret")

// counting wraps a Receiver and counts the calls that reach it.
type counting struct {
	Receiver
	calls atomic.Int64
}

func (c *counting) Receive(ctx context.Context, m receiverstore.Message) (receiverstore.Outcome, error) {
	c.calls.Add(1)
	return c.Receiver.Receive(ctx, m)
}

// fixture is a server over a real receiver.db, behind httptest.
type fixture struct {
	store *receiverstore.Store
	recv  *counting
	srv   *httptest.Server
	logs  *bytes.Buffer
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, opts ...receiverstore.Option) *fixture {
	t.Helper()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, recv: &counting{Receiver: st}, logs: new(bytes.Buffer), reg: prometheus.NewRegistry()}
	h := NewServer(f.recv, secret, ServerOptions{
		MaxBody: 64 << 10,
		Logger:  slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: f.reg,
	})
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// delivery is one request as the relay would send it.
type delivery struct {
	method, id, flow string
	seq              int64
	body             []byte
	ts               time.Time
	key              []byte // signing secret
	edit             func(h http.Header)
}

func deliver(id, flow string, seq int64, body string) delivery {
	return delivery{method: http.MethodPost, id: id, flow: flow, seq: seq, body: []byte(body), ts: time.Now(), key: secret}
}

func (d delivery) request(t testing.TB, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(d.method, url, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	webhook.SetHeaders(req.Header, d.key, d.id, d.flow, d.seq, d.ts, d.body)
	if d.edit != nil {
		d.edit(req.Header)
	}
	return req
}

// send posts d and returns the status and the decoded JSON answer.
func (f *fixture) send(t *testing.T, d delivery) (int, answer) {
	t.Helper()
	resp, err := f.srv.Client().Do(d.request(t, f.srv.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return decode(t, resp)
}

func decode(t testing.TB, resp *http.Response) (int, answer) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.Outcome == "" || (a.Rule != "") != (resp.StatusCode == 400) ||
		(a.Error != "") != (resp.StatusCode >= 400 && a.Outcome != "conflict" && a.Outcome != "gap" && a.Outcome != "unsupported_delta") {
		t.Fatalf("%d answer %q: want JSON with an outcome, a rule on 400 only, an error on refusals only (%v)", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a
}

func (f *fixture) snap(t *testing.T) receiverstore.Snapshot {
	t.Helper()
	s, err := f.store.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServer_ReceiverOutcomes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, receiverstore.WithMaxDelta(10))
	steps := []struct {
		d       delivery
		status  int
		outcome string
	}{
		{deliver("e1", "tenant/a b", 1, `{"delta": 5}`), 200, "accepted"},
		{deliver("e1", "tenant/a b", 1, `{"delta": 5}`), 200, "duplicate"},
		{deliver("e1", "tenant/a b", 1, `{"delta": 6}`), 409, "conflict"},
		{deliver("e3", "tenant/a b", 3, `{"delta": 1}`), 409, "gap"},
		{deliver("e2", "tenant/a b", 2, `{"delta": 50}`), 422, "unsupported_delta"},
		{deliver("e2", "tenant/a b", 2, `{"delta": 5}`), 200, "accepted"},
	}
	for i, s := range steps {
		st, a := f.send(t, s.d)
		if st != s.status || a.Outcome != s.outcome {
			t.Fatalf("step %d (%s seq %d %s): %d %+v, want %d outcome %s", i, s.d.id, s.d.seq, s.d.body, st, a, s.status, s.outcome)
		}
	}
	sn := f.snap(t)
	if len(sn.Flows) != 1 || sn.Flows[0].Flow != "tenant/a b" || sn.Flows[0].Total != 10 || sn.Flows[0].NextExpected != 3 {
		t.Errorf("flows = %+v, want tenant/a b (unescaped) with total 10, next 3", sn.Flows)
	}
	if got := counter(t, f.reg, "accepted"); got != 2 {
		t.Errorf("receives_total{accepted} = %v, want 2", got)
	}
	for _, l := range []string{"duplicate", "conflict", "gap", "unsupported_delta"} {
		if got := counter(t, f.reg, l); got != 1 {
			t.Errorf("receives_total{%s} = %v, want 1", l, got)
		}
	}
}

// Every refusal before the store answers its status and JSON error and does
// not call the store.
func TestServer_RefusalsTouchNoDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if st, a := f.send(t, deliver("e1", "f", 1, `{"delta": 1}`)); st != 200 {
		t.Fatalf("setup: %d %+v", st, a)
	}
	before := f.snap(t)
	calls := f.recv.calls.Load()

	with := func(d delivery, change func(*delivery)) delivery { change(&d); return d }
	ok := deliver("e2", "f", 2, `{"delta": 2}`)
	cases := []struct {
		name   string
		d      delivery
		status int
		err    string
	}{
		{"GET", with(ok, func(d *delivery) { d.method = http.MethodGet }), 405, ErrorMethod},
		{"PUT", with(ok, func(d *delivery) { d.method = http.MethodPut }), 405, ErrorMethod},
		{"body above MaxBody", with(ok, func(d *delivery) { d.body = bytes.Repeat([]byte(" "), 64<<10+1) }), 413, ErrorTooLarge},
		{"wrong secret", with(ok, func(d *delivery) { d.key = []byte("other") }), 401, ErrorUnauthorized},
		{"no signature", with(ok, func(d *delivery) { d.edit = func(h http.Header) { h.Del(webhook.HeaderSignature) } }), 401, ErrorUnauthorized},
		{"no route signature", with(ok, func(d *delivery) { d.edit = func(h http.Header) { h.Del(webhook.HeaderRoute) } }), 401, ErrorUnauthorized},
		{"no id", with(ok, func(d *delivery) { d.edit = func(h http.Header) { h.Del(webhook.HeaderID) } }), 401, ErrorUnauthorized},
		{"timestamp 6 minutes old", with(ok, func(d *delivery) { d.ts = time.Now().Add(-6 * time.Minute) }), 401, ErrorUnauthorized},
		{"timestamp 6 minutes ahead", with(ok, func(d *delivery) { d.ts = time.Now().Add(6 * time.Minute) }), 401, ErrorUnauthorized},
		{"timestamp not a number", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderTimestamp, "soon") }
		}), 401, ErrorUnauthorized},
		{"body changed after signing", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) {
				h.Set(webhook.HeaderSignature, webhook.Sign(secret, "e2", d.ts, []byte(`{"delta": 9}`)))
			}
		}), 401, ErrorUnauthorized},
		{"flow changed after signing", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderFlow, "g") }
		}), 401, ErrorUnauthorized},
		{"seq changed after signing", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderSeq, "3") }
		}), 401, ErrorUnauthorized},
		{"seq not an integer", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderSeq, "2.0") }
		}), 400, ErrorInvalidHeader},
		{"flow badly escaped", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderFlow, "f%zz") }
		}), 400, ErrorInvalidHeader},
		{"idempotency key differs", with(ok, func(d *delivery) {
			d.edit = func(h http.Header) { h.Set(webhook.HeaderIdempotencyKey, "other") }
		}), 400, ErrorInvalidHeader},
	}
	for _, c := range cases {
		st, a := f.send(t, c.d)
		if st != c.status || a.Outcome != c.err {
			t.Errorf("%s: %d %+v, want %d outcome %s", c.name, st, a, c.status, c.err)
		}
	}
	if n := f.recv.calls.Load(); n != calls {
		t.Errorf("store calls during refusals = %d, want 0", n-calls)
	}
	if after := f.snap(t); !reflect.DeepEqual(after, before) {
		t.Errorf("refusals changed the store:\n%+v\n%+v", after, before)
	}
	if got := counter(t, f.reg, ErrorUnauthorized); got != 10 {
		t.Errorf("receives_total{unauthorized} = %v, want 10", got)
	}
}

// A body above MaxBody with no Content-Length (chunked) is refused while it
// is read.
func TestServer_ChunkedOverLargeBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := deliver("e1", "f", 1, strings.Repeat(" ", 64<<10+10)+`{"delta": 1}`)
	req := d.request(t, f.srv.URL)
	req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(d.body))) // hides the length
	req.ContentLength = -1
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if st, a := decode(t, resp); st != 413 || a.Outcome != ErrorTooLarge {
		t.Fatalf("%d %+v, want 413 too_large", st, a)
	}
	if f.recv.calls.Load() != 0 {
		t.Error("the store was called")
	}
}

// MaxBody at its largest reads bodies as any other: the bound read
// (MaxBody + 1 bytes) does not wrap to nothing.
func TestServer_LargestMaxBody(t *testing.T) {
	t.Parallel()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(NewServer(st, secret, ServerOptions{MaxBody: math.MaxInt64}))
	t.Cleanup(srv.Close)
	f := &fixture{store: st, srv: srv}
	if code, a := f.send(t, deliver("e1", "f", 1, `{"delta": 1}`)); code != 200 || a.Outcome != "accepted" {
		t.Fatalf("%d %+v, want 200 accepted", code, a)
	}
}

// Bodies and messages the store refuses are 400 and change nothing.
func TestServer_StoreRefusalsAre400(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.snap(t)
	for _, c := range []struct {
		d         delivery
		err, rule string
	}{
		{deliver("e1", "f", 1, `{"delta": 0}`), ErrorInvalidBody, "delta_out_of_range"},
		{deliver("e1", "f", 1, `{"delta": 1.0}`), ErrorInvalidBody, "not_an_integer"},
		{deliver("e1", "f", 1, ``), ErrorInvalidBody, "not_json"},
		{deliver(strings.Repeat("x", 201), "f", 1, `{"delta": 1}`), ErrorInvalidMessage, RuleInvalidID},
		{deliver("e1", "f\tg", 1, `{"delta": 1}`), ErrorInvalidMessage, RuleInvalidFlow},
		{deliver("e1", "f", 0, `{"delta": 1}`), ErrorInvalidMessage, RuleInvalidSeq},
		{deliver("e1", "f", -5, `{"delta": 1}`), ErrorInvalidMessage, RuleInvalidSeq},
	} {
		if st, a := f.send(t, c.d); st != 400 || a.Outcome != c.err || a.Rule != c.rule {
			t.Errorf("%q seq %d %q: %d %+v, want 400 %s rule %s", c.d.id, c.d.seq, c.d.body, st, a, c.err, c.rule)
		}
	}
	if after := f.snap(t); !reflect.DeepEqual(after, before) {
		t.Errorf("refused messages changed the store")
	}
}

// An effect's failure is 503 effect_failed and changes nothing; an effect's
// refusal of the body is 400; the retry after the effect recovers is 200.
func TestServer_EffectFailureIs503(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	fail.Store(true)
	f := newFixture(t, receiverstore.WithEffect(func(ctx context.Context, tx receiverstore.Tx, m receiverstore.Message) error {
		if bytes.Equal(m.Body, []byte("poison")) {
			return fmt.Errorf("cannot parse: %w", receiverstore.ErrInvalidBody)
		}
		if fail.Load() {
			return errors.New("downstream secret detail")
		}
		return nil
	}))
	if st, a := f.send(t, deliver("o1", "shop", 1, `{"any":"json"}`)); st != 503 || a.Outcome != ErrorEffectFailed {
		t.Fatalf("failing effect: %d %+v, want 503 effect_failed", st, a)
	}
	if st, a := f.send(t, deliver("o1", "shop", 1, `poison`)); st != 400 || a.Outcome != ErrorInvalidBody || a.Rule != "effect_refused" {
		t.Fatalf("refusing effect: %d %+v, want 400 invalid_body rule effect_refused", st, a)
	}
	if sn := f.snap(t); len(sn.Receipts) != 0 {
		t.Fatalf("receipts after failures = %+v, want none", sn.Receipts)
	}
	fail.Store(false)
	if st, a := f.send(t, deliver("o1", "shop", 1, `{"any":"json"}`)); st != 200 || a.Outcome != "accepted" {
		t.Fatalf("retry: %d %+v, want 200 accepted", st, a)
	}
	if !strings.Contains(f.logs.String(), "downstream secret detail") {
		t.Errorf("the effect's error is not in the server log:\n%s", f.logs)
	}
}

// An internal error (here: the store is closed) is 500 internal;
// its detail is in the log, not in the answer.
func TestServer_InternalErrorDoesNotLeak(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(deliver("e1", "f", 1, `{"delta": 1}`).request(t, f.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	want := `{"outcome":"internal","error":"internal error; the detail is in the receiver's log"}` + "\n"
	if resp.StatusCode != 500 || string(raw) != want {
		t.Fatalf("closed store: %d %q, want 500 %s", resp.StatusCode, raw, want)
	}
	// The detail is whatever the closed store says first (its database or its
	// writer lock file); it is in the log, with the message's identity.
	if !strings.Contains(f.logs.String(), `msg="inbox: receive failed" id=e1 flow=f seq=1 err="receive: `) {
		t.Errorf("the detail is not in the server log:\n%s", f.logs)
	}
}

// An empty secret refuses every request (500, logged): a server that cannot
// verify must not receive.
func TestServer_EmptySecretRefusesEverything(t *testing.T) {
	t.Parallel()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rc := &counting{Receiver: st}
	var logs bytes.Buffer
	srv := httptest.NewServer(NewServer(rc, nil, ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	defer srv.Close()
	d := deliver("e1", "f", 1, `{"delta": 1}`)
	d.key = []byte("x")
	resp, err := srv.Client().Do(d.request(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, a := decode(t, resp); code != 500 || a.Outcome != ErrorInternal || rc.calls.Load() != 0 {
		t.Fatalf("%d %+v calls %d, want 500 internal and no store call", code, a, rc.calls.Load())
	}
	if !strings.Contains(logs.String(), "cannot verify") {
		t.Errorf("log = %s", logs.String())
	}
}

// The server's clock decides the window: ServerOptions.Now and Tolerance.
func TestServer_ToleranceAndClock(t *testing.T) {
	t.Parallel()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Unix(1_800_000_000, 0)
	srv := httptest.NewServer(NewServer(st, secret, ServerOptions{Tolerance: 30 * time.Second, Now: func() time.Time { return now }}))
	defer srv.Close()
	for _, c := range []struct {
		offset time.Duration
		status int
	}{{-31 * time.Second, 401}, {31 * time.Second, 401}, {-30 * time.Second, 200}} {
		d := deliver("e1", "f", 1, `{"delta": 1}`)
		d.ts = now.Add(c.offset)
		resp, err := srv.Client().Do(d.request(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("timestamp %v from the server's clock: %d, want %d", c.offset, resp.StatusCode, c.status)
		}
	}
}

func TestStatusFor(t *testing.T) {
	t.Parallel()
	for o, want := range map[receiverstore.Outcome]int{
		receiverstore.Accepted: 200, receiverstore.Duplicate: 200, receiverstore.Conflict: 409,
		receiverstore.Gap: 409, receiverstore.UnsupportedDelta: 422,
	} {
		if got, ok := StatusFor(o); !ok || got != want {
			t.Errorf("StatusFor(%s) = %d, %v; want %d", o, got, ok, want)
		}
	}
	if _, ok := StatusFor("other"); ok {
		t.Error("StatusFor(other) ok")
	}
}

// counter reads fairrelay_receiver_receives_total{outcome=label}.
func counter(t *testing.T, g prometheus.Gatherer, label string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fairrelay_receiver_receives_total" {
			continue
		}
		for _, m := range mf.Metric {
			if labelIs(m, "outcome", label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no receives_total series for %s", label)
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
