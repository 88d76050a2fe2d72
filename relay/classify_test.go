package relay_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// kind is what the classification table says of one answer.
type kind struct {
	reason      string
	permanent   bool
	destination bool
	retryAfter  time.Duration
}

func kindOf(t *testing.T, err error) kind {
	t.Helper()
	if err == nil {
		return kind{}
	}
	var f *relay.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v is not a *relay.Failure", err)
	}
	return kind{f.Reason, f.Permanent, f.Destination, f.RetryAfter}
}

// TestHTTPClassificationStatuses is the classification table of
// docs/runtime.md, one row per status: the reason, permanent or not, the
// destination's fault or the event's, the Retry-After honoured (429 and
// 503 only, capped by MaxRetryAfter), and the error text it carries.
func TestHTTPClassificationStatuses(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		status     int
		body       string
		retryAfter string
		want       kind
		text       string // the error text contains it
	}{
		{200, `{"outcome":"accepted","total":5}`, "", kind{}, ""},
		{200, `{"outcome":"duplicate"}`, "", kind{}, ""},
		{204, ``, "", kind{}, ""},
		{400, `{"outcome":"invalid_body","rule":"delta_out_of_range","error":"delta 1000000 is outside ±100000"}`, "",
			kind{relay.ReasonInvalidBody, true, false, 0}, "400 Bad Request: rule delta_out_of_range: delta 1000000 is outside ±100000"},
		{400, `{"error":"body is not JSON"}`, "", kind{relay.ReasonInvalidBody, true, false, 0}, "400 Bad Request: body is not JSON"},
		{413, ``, "", kind{relay.ReasonTooLarge, true, false, 0}, "413 Request Entity Too Large"},
		{409, `{"outcome":"conflict"}`, "", kind{relay.ReasonConflict, false, false, 0}, "409 Conflict: conflict"},
		{409, `{"outcome":"gap","error":"expected seq 11"}`, "", kind{relay.ReasonGap, false, false, 0}, "409 Conflict: expected seq 11"},
		{409, `not json`, "", kind{relay.ReasonConflict, false, false, 0}, "409 Conflict"},
		{422, `{"outcome":"unsupported_delta"}`, "", kind{relay.ReasonUnsupportedDelta, false, false, 0}, "422 Unprocessable Entity"},
		{401, `{"error":"bad signature"}`, "", kind{relay.ReasonUnauthorized, false, true, 0}, "401 Unauthorized: bad signature"},
		{403, ``, "", kind{relay.ReasonForbidden, false, true, 0}, "403 Forbidden"},
		{404, ``, "", kind{relay.ReasonNotFound, false, true, 0}, "404 Not Found"},
		{429, ``, "", kind{relay.ReasonRateLimited, false, true, 0}, "429 Too Many Requests"},
		{429, ``, "120", kind{relay.ReasonRateLimited, false, true, 2 * time.Minute}, "429"},
		{429, ``, "999999999", kind{relay.ReasonRateLimited, false, true, time.Hour}, "429"}, // capped by MaxRetryAfter
		{429, ``, "soon", kind{relay.ReasonRateLimited, false, true, 0}, "429"},              // unreadable: ignored
		{503, `{"error":"database locked"}`, now.Add(90 * time.Second).Format(http.TimeFormat),
			kind{relay.ReasonUnavailable, false, true, 90 * time.Second}, "503 Service Unavailable: database locked"},
		{503, ``, now.Add(-time.Minute).Format(http.TimeFormat), kind{relay.ReasonUnavailable, false, true, 0}, "503"}, // in the past
		{500, ``, "30", kind{relay.ReasonUnavailable, false, true, 0}, "500 Internal Server Error"},                    // not on a 500
		{502, ``, "", kind{relay.ReasonUnavailable, false, true, 0}, "502 Bad Gateway"},
		{504, ``, "", kind{relay.ReasonUnavailable, false, true, 0}, "504 Gateway Timeout"},
		{302, ``, "", kind{"http_302", false, false, 0}, "302 Found"},
		{418, ``, "", kind{"http_418", false, false, 0}, "418 I'm a teapot"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.status == 302 {
				w.Header().Set("Location", "/elsewhere")
			}
			if tt.retryAfter != "" {
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		err := newHTTP(t, srv.URL, relay.HTTPOptions{Now: func() time.Time { return now }}).Handle(context.Background(), hookEvent)
		srv.Close()
		if got := kindOf(t, err); got != tt.want {
			t.Errorf("status %d %s (Retry-After %q): %+v, want %+v", tt.status, tt.body, tt.retryAfter, got, tt.want)
		}
		if tt.text != "" && (err == nil || !strings.Contains(err.Error(), tt.text)) {
			t.Errorf("status %d: error %v, want it to contain %q", tt.status, err, tt.text)
		}
	}
}

// TestHTTPClassificationTransport: every way of not getting an answer is
// the destination's fault, "unavailable": a closed port, a name that does
// not resolve, a certificate not trusted, a timeout, an answer cut short.
func TestHTTPClassificationTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there any more

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer tlsSrv.Close()

	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"err`) // and the connection closes
	}))
	defer cut.Close()

	tests := []struct {
		name    string
		url     string
		o       relay.HTTPOptions
		text    string // the error text contains it
		timeout bool
	}{
		{"connection refused", "http://" + closed + "/events", relay.HTTPOptions{}, "connection refused", false},
		{"DNS", "http://receiver.fairrelay.invalid/events", relay.HTTPOptions{Timeout: 5 * time.Second}, "receiver.fairrelay.invalid", false},
		{"TLS", tlsSrv.URL + "/events", relay.HTTPOptions{}, "certificate", false},
		{"timeout", slow.URL, relay.HTTPOptions{Timeout: 50 * time.Millisecond}, "deadline exceeded", true},
		{"cut answer", cut.URL, relay.HTTPOptions{}, "503 Service Unavailable, then reading the answer", false},
	}
	for _, tt := range tests {
		err := newHTTP(t, tt.url, tt.o).Handle(context.Background(), hookEvent)
		want := kind{relay.ReasonUnavailable, false, true, 0}
		if got := kindOf(t, err); got != want {
			t.Errorf("%s: %+v (%v), want %+v", tt.name, got, err, want)
			continue
		}
		if !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, err, tt.text)
		}
		if relay.IsTimeout(err) != tt.timeout {
			t.Errorf("%s: IsTimeout = %v, want %v", tt.name, !tt.timeout, tt.timeout)
		}
	}
}

// TestHTTPErrorsRedactUserInfo: a password (or a user) given inside the
// URL never shows in a failure's text.
func TestHTTPErrorsRedactUserInfo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	err = newHTTP(t, "http://alice:s3cret@"+closed+"/events", relay.HTTPOptions{}).Handle(context.Background(), hookEvent)
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("error %v: want a failure without the user info", err)
	}
	if !strings.Contains(err.Error(), "REDACTED@"+closed) {
		t.Fatalf("error %v: want the URL with REDACTED@", err)
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Post "https://bob:pw@example.com/x": EOF`: `Post "https://REDACTED@example.com/x": EOF`,
		"to http://u@h/ and ftp://a:b@c":           "to http://REDACTED@h/ and ftp://REDACTED@c",
		"mail bob@example.com at http://h/p?x=@":   "mail bob@example.com at http://h/p?x=@",
		"no url here":                              "no url here",
	} {
		if got := relay.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSettledErrorText: the settle carries the handler's error text, made
// printable, user info redacted; for a Failure the text of its Err (the
// reason is recorded beside it), and its kind and RetryAfter.
func TestSettledErrorText(t *testing.T) {
	q := newFake(testPolicy(60_000, 5))
	q.enqueue("a", 1)
	q.enqueue("b", 1)
	q.enqueue("c", 1)
	q.enqueue("d", 1)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		switch e.Flow {
		case "d":
			return relay.FailDestination(relay.ReasonRateLimited, nil).WithRetryAfter(math.MaxInt64)
		case "a":
			return errors.New("Post \"https://bob:pw@receiver.example/x\":\nEOF")
		case "b":
			return relay.FailDestination(relay.ReasonRateLimited, errors.New("429 Too Many Requests")).WithRetryAfter(1500 * time.Microsecond)
		}
		panic("boom")
	})
	run := start(t, q, h, relay.Options{})
	q.waitFor(t, "four settles", func() bool {
		n := 0
		for _, items := range q.settles {
			n += len(items)
		}
		return n >= 4
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	want := map[string]queuestore.Result{
		"a/1": {Reason: relay.ReasonHandler, Error: `Post "https://REDACTED@receiver.example/x": EOF`},
		"b/1": {Reason: relay.ReasonRateLimited, Error: "429 Too Many Requests", RetryAfter: 2},
		"c/1": {Reason: relay.ReasonPanic, Error: "handler panicked: boom"},
		// The longest wait there is, in ticks rounded up, not wrapped
		// negative (a wait the queue would refuse); the queue caps it.
		"d/1": {Reason: relay.ReasonRateLimited, RetryAfter: math.MaxInt64/1_000_000 + 1},
	}
	for _, items := range q.settles {
		for _, it := range items {
			if w, ok := want[it.EventID]; ok && it.Result != w {
				t.Errorf("%s settled %+v, want %+v", it.EventID, it.Result, w)
			}
			delete(want, it.EventID)
		}
	}
	if len(want) > 0 {
		t.Errorf("not settled: %v", want)
	}
}
